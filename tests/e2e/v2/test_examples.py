"""Every example API the protocol can carry, called with tritonclient four ways.

HTTP in binary mode (tritonclient's default), HTTP in JSON mode, gRPC, and gRPC with
`tritonclient.grpc.aio`: each must answer what the native route answers for the same
input (the parity table below; `-s` prints it). JSON mode is skipped where an input or
output is binary (images, audio): the protocol's JSON has only UTF-8 strings.
"""

from __future__ import annotations

import io
import typing as t
from dataclasses import dataclass, field

import numpy as np
import pytest
from PIL import Image

import tensorwire
from examples.audio import AudioFiles
from examples.constrained import TextGenerator
from examples.descriptors import Retrieval
from examples.frames import Frames
from examples.images import ImageTools, draw_digit
from examples.iris import Iris
from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from examples.tf_tensors import TfOps
from tests.e2e.test_files import mp3
from tests.support.v2_calls import (
    MODES,
    V2Reply,
    http_client,
    infer,
    plain_native,
    plain_v2,
    same,
    texts,
)


def encoded(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt)
    return buf.getvalue()


PNG = encoded(Image.new("RGB", (40, 20), "red"), "PNG")
DIGIT = encoded(draw_digit(3).convert("RGB"), "JPEG")
MP3 = mp3(12)
X = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
ROWS = np.array([[1, 2, 3], [4, 5, 6]], np.float32)


@dataclass
class Case:
    """One API: its v2 inputs, and the same call on the native route."""

    id: str
    service: type
    api: str
    inputs: dict[str, np.ndarray]
    args: tuple[t.Any, ...] = ()
    kwargs: dict[str, t.Any] = field(default_factory=dict)
    #: Inputs or outputs that are binary: no JSON mode.
    binary: bool = False


def files(tmp: t.Any) -> dict[str, t.Any]:
    (tmp / "song.mp3").write_bytes(MP3)
    (tmp / "red.png").write_bytes(PNG)
    (tmp / "notes.txt").write_bytes(b"first line\n")
    return {"mp3": tmp / "song.mp3", "png": tmp / "red.png", "txt": tmp / "notes.txt"}


def cases(paths: dict[str, t.Any]) -> list[Case]:
    image = Image.open(io.BytesIO(PNG))
    return [
        Case("summarize", Quickstart, "summarize",
             {"text": texts("one two three four"), "max_words": np.array([2])},
             kwargs={"text": "one two three four", "max_words": 2}),
        Case("upper", Quickstart, "upper", {"text": texts("héllo")}, args=("héllo",)),
        Case("count", Quickstart, "count", {"text": texts("a bb ccc")}, args=("a bb ccc",)),
        Case("classify", Iris, "classify", {"x": X}, kwargs={"x": X}),
        Case("predict", Iris, "predict", {"x": X}, args=(X,)),
        Case("species", Iris, "species", {"x": np.repeat(X, 3, axis=0)},
             kwargs={"x": np.repeat(X, 3, axis=0)}),
        Case("ratios", Frames, "ratios",
             {"species": texts("setosa", "virginica"), "length": np.array([5.1, 6.0]),
              "width": np.array([3.5, 3.0])},
             kwargs={"df": [{"species": "setosa", "length": 5.1, "width": 3.5},
                            {"species": "virginica", "length": 6.0, "width": 3.0}]}),
        Case("totals", Frames, "totals",
             {"item": texts("a", "b"), "qty": np.array([2, 3]), "price": np.array([1.5, 2.0])},
             kwargs={"df": {"item": ["a", "b"], "qty": [2, 3], "price": [1.5, 2.0]}}),
        Case("frame-count", Frames, "count",
             {"item": texts("a", "b", "c"), "qty": np.array([1, 2, 3]),
              "price": np.array([1.0, 1.0, 1.0])},
             args=({"item": ["a", "b", "c"], "qty": [1, 2, 3], "price": [1.0, 1.0, 1.0]},)),
        Case("nearest", Retrieval, "nearest",
             {"query": texts('{"vector": [1, 0], "label": "q"}'),
              "candidates": np.array([[1, 0], [0, 1], [1, 1]], np.float16)},
             kwargs={"query": {"vector": [1, 0], "label": "q"},
                     "candidates": np.array([[1, 0], [0, 1], [1, 1]], np.float16)}),
        Case("normalize", Retrieval, "normalize",
             {"vector": np.array([3, 4], np.float16), "label": texts("ABC")},
             kwargs={"vector": np.array([3, 4], np.float16), "label": "ABC"}),
        Case("analyze", ReviewAnalyzer, "analyze",
             {"params": texts('{"text": "great shoes", "stars": 5, "tags": ["red"]}')},
             kwargs={"params": {"text": "great shoes", "stars": 5, "tags": ["red"]}}),
        Case("search", ReviewAnalyzer, "search",
             {"query": texts("red"), "top_k": np.array([2]), "mode": texts("fuzzy")},
             kwargs={"query": "red", "top_k": 2, "mode": "fuzzy"}),
        Case("shout", ReviewAnalyzer, "shout", {"text": texts("hey")}, args=("hey",)),
        Case("stats", ReviewAnalyzer, "stats", {"values": np.array([1.0, 2.0, 6.0])},
             args=([1.0, 2.0, 6.0],)),
        Case("complete", TextGenerator, "complete",
             {"prompt": texts("once upon a time"), "temperature": np.array([0.5]),
              "max_tokens": np.array([200])},
             kwargs={"prompt": "once upon a time", "temperature": 0.5, "max_tokens": 200}),
        Case("upload_image", ImageTools, "upload_image", {"image": texts(PNG)},
             args=(image,), binary=True),
        Case("resize", ImageTools, "resize",
             {"image": texts(PNG), "width": np.array([8]), "height": np.array([4])},
             kwargs={"image": image, "width": 8, "height": 4}, binary=True),
        Case("mirror_png", ImageTools, "mirror_png", {"data": texts(PNG)}, args=(PNG,),
             binary=True),
        Case("predict_digit", ImageTools, "predict_digit", {"image": texts(DIGIT)},
             kwargs={"image": ("d.jpg", DIGIT, "image/jpeg")}, binary=True),
        Case("describe", ImageTools, "describe",
             {"image": texts(PNG), "caption": texts("red"), "tags": texts("a", "b")},
             kwargs={"image": image, "caption": "red", "tags": ["a", "b"]}, binary=True),
        Case("sizes", ImageTools, "sizes", {"images": texts(PNG, DIGIT)},
             kwargs={"images": [image, Image.open(io.BytesIO(DIGIT))]}, binary=True),
        Case("file_sizes", ImageTools, "file_sizes", {"files": texts(PNG, b"some text\n")},
             kwargs={"files": [paths["png"], ("t.txt", b"some text\n", "text/plain")]},
             binary=True),
        Case("thumbnails", ImageTools, "thumbnails", {"image": texts(PNG)},
             kwargs={"image": image}, binary=True),
        Case("transcribe", AudioFiles, "transcribe", {"audio": texts(MP3)},
             kwargs={"audio": paths["mp3"]}, binary=True),
        Case("speak", AudioFiles, "speak", {"text": texts("hi"), "rate": np.array([4000])},
             kwargs={"text": "hi", "rate": 4000}, binary=True),
        Case("append", AudioFiles, "append",
             {"file": texts(b"first line\n"), "line": texts("second")},
             kwargs={"file": paths["txt"], "line": "second"}, binary=True),
        Case("checksum", AudioFiles, "checksum", {"file": texts(PNG)}, args=(paths["png"],),
             binary=True),
        Case("scale", TfOps, "scale", {"x": ROWS, "factor": np.array([0.5])},
             kwargs={"x": ROWS, "factor": 0.5}),
        Case("row_sums", TfOps, "row_sums", {"x": ROWS}, args=(ROWS,)),
        Case("tf-shout", TfOps, "shout", {"words": texts("ab", "çd")},
             kwargs={"words": np.array(["ab", "çd"])}),
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return {c.id: c for c in cases(files(tmp_path_factory.mktemp("inputs")))}


#: The case ids, in table order (the parametrisation needs them before any fixture).
IDS = [
    "summarize", "upper", "count", "classify", "predict", "species", "ratios", "totals",
    "frame-count", "nearest", "normalize", "analyze", "search", "shout", "stats",
    "complete", "upload_image", "resize", "mirror_png", "predict_digit", "describe",
    "sizes", "file_sizes", "thumbnails", "transcribe", "speak", "append", "checksum",
    "scale", "row_sums", "tf-shout"]
PARITY: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="module")
def native(servers: t.Any, table: dict[str, Case]) -> dict[str, t.Any]:
    """Each case's answer on the native route (tensorwire's client over HTTP)."""
    out = {}
    for case in table.values():
        with tensorwire.SyncClient(servers[case.service].http_url) as client:
            out[case.id] = plain_native(client.call(case.api, *case.args, **case.kwargs))
    return out


def test_the_table_covers_every_example_api_the_protocol_carries(table: dict[str, Case]
                                                                 ) -> None:
    assert sorted(IDS) == sorted(table)
    carried = set()
    for service in (Quickstart, Iris, Frames, Retrieval, ReviewAnalyzer, TextGenerator,
                    ImageTools, AudioFiles, TfOps):
        spec = tensorwire.get_service_spec(service)
        carried |= {(service, name) for name, api in spec.apis.items()
                    if not api.output.stream and name != "fail"}
    assert carried == {(c.service, c.api) for c in table.values()}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case_id", IDS)
def test_v2_answers_what_the_native_route_answers(servers: t.Any, table: dict[str, Case],
                                                  native: dict[str, t.Any], case_id: str,
                                                  mode: str) -> None:
    case = table[case_id]
    row = PARITY.setdefault(case_id, {})
    if mode == "http-json" and case.binary:
        row[mode] = "binary only"
        pytest.skip("binary inputs or outputs have no JSON form in the protocol")
    server = servers[case.service]
    reply: V2Reply = infer(mode, server, case.api, case.inputs)
    metadata = http_client(server).get_model_metadata(case.api)
    got, want = plain_v2(reply, metadata), native[case_id]
    if set(got) == {"result"} and not (isinstance(want, dict) and set(want) == {"result"}):
        got = got["result"]
    row[mode] = "same" if same(got, want) else "DIFFERENT"
    assert same(got, want), f"v2 {mode}: {got!r}\nnative: {want!r}"


def test_parity_table(capsys: pytest.CaptureFixture[str]) -> None:
    """The native route and every v2 mode answer the same (printed with -s)."""
    lines = ["| API | " + " | ".join(MODES) + " |", "|---" * (len(MODES) + 1) + "|"]
    for case_id in IDS:
        row = PARITY.get(case_id, {})
        lines.append(f"| {case_id} | " + " | ".join(row.get(m, "not run") for m in MODES)
                     + " |")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not any("DIFFERENT" in line for line in lines)
