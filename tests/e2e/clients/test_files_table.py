"""The file and image examples (issue 5's codecs) through both clients and protocols.

Skipped where those examples are not present; with them, every call must give the same
Python result over HTTP and gRPC: Paths for file outputs, dicts for models, PIL images
where `output_types` asks for them.
"""

from __future__ import annotations

import io
import pathlib
from typing import Any

import pytest

import tensorwire
from tests.support.client_calls import call_client, typed
from tests.support.servers import url_of

images = pytest.importorskip("examples.images", reason="the file/image codecs are not here")
audio = pytest.importorskip("examples.audio", reason="the file/image codecs are not here")
Image = pytest.importorskip("PIL.Image")


def norm(value: Any) -> Any:
    """A comparable form: files by suffix and content, images by size and mode."""
    if isinstance(value, pathlib.Path):
        return ("Path", value.suffix, value.read_bytes())
    if isinstance(value, Image.Image):
        return ("Image", value.size, value.mode)
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, list):
        return [norm(v) for v in value]
    return value


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Any]:
    from tests.e2e.test_files import mp3

    tmp = tmp_path_factory.mktemp("inputs")
    jpg = tmp / "seven.jpg"
    images.draw_digit(7).convert("RGB").save(jpg, "JPEG")
    png = Image.new("RGB", (40, 30), (10, 20, 30))
    png.format = "PNG"
    raw = io.BytesIO()
    png.save(raw, "PNG")
    (tmp / "a.txt").write_text("hello\n")
    (tmp / "song.mp3").write_bytes(mp3(10))
    return {"jpg": jpg, "png": png, "png_bytes": raw.getvalue(), "txt": tmp / "a.txt",
            "mp3": tmp / "song.mp3", "digit": images.draw_digit(3)}


CALLS = [
    ("upload_image", images.ImageTools, lambda i: ((i["png"],), {}),
     lambda r: typed(r) == typed({"width": 40, "height": 30, "mode": "RGB", "format": "PNG"})),
    ("resize", images.ImageTools, lambda i: ((), {"image": i["png"], "width": 8, "height": 6}),
     lambda r: r[0] == "Path" and r[1] == ".png"),
    ("mirror_png", images.ImageTools, lambda i: ((i["png_bytes"],), {}),
     lambda r: isinstance(r, bytes) and r.startswith(b"\x89PNG")),
    ("predict_digit", images.ImageTools, lambda i: ((), {"image": i["jpg"]}),
     lambda r: r == 7),
    ("describe", images.ImageTools,
     lambda i: ((), {"image": i["png"], "caption": "cap", "tags": ["a", "b"]}),
     lambda r: r["caption"] == "cap" and r["tags"] == ["a", "b"] and r["width"] == 40),
    ("sizes", images.ImageTools, lambda i: ((), {"images": [i["png"], i["digit"]]}),
     lambda r: r == [[40, 30], [28, 28]]),
    ("file_sizes", images.ImageTools, lambda i: ((), {"files": [i["jpg"], i["txt"]]}),
     lambda r: r[1] == [".txt", 6] and r[0][0] == ".jpg"),
    ("thumbnails", images.ImageTools, lambda i: ((), {"image": i["png"]}),
     lambda r: r["small"][0] == "Path" and r["sizes"] == {"small": [32, 24],
                                                          "large": [40, 30]}),
    ("transcribe", audio.AudioFiles, lambda i: ((), {"audio": i["mp3"]}),
     lambda r: r.startswith("10 MP3 frames")),
    ("speak", audio.AudioFiles, lambda i: ((), {"text": "hi"}),
     lambda r: r[0] == "Path" and r[1] == ".wav" and r[2].startswith(b"RIFF")),
    ("append", audio.AudioFiles, lambda i: ((), {"file": i["txt"], "line": "more"}),
     lambda r: r == ("Path", ".txt", b"hello\nmore\n")),
    ("checksum", audio.AudioFiles, lambda i: ((i["txt"],), {}),
     lambda r: r["size"] == 6 and r["suffix"] == ".txt"),
]


def call(url: str, kind: str, api: str, args: tuple, kwargs: dict, **options: Any) -> Any:
    return call_client(url, kind, api, args, kwargs, norm, **options)


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize(("api", "service", "make", "check"), CALLS, ids=[c[0] for c in CALLS])
def test_files_and_images_answer_the_same(servers, inputs, api, service, make, check,
                                          client_kind):
    args, kwargs = make(inputs)
    results = {p: call(url_of(servers[service], p), client_kind, api, args, kwargs)
               for p in ("http", "grpc")}
    assert typed(results["http"]) == typed(results["grpc"])  # 64 is not 64.0
    assert check(results["http"]), results["http"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_output_types_give_pil_images(servers, inputs, protocol):
    url = url_of(servers[images.ImageTools], protocol)
    out = call(url, "sync", "resize", (), {"image": inputs["png"], "width": 5, "height": 4},
               output_types={"resize": Image.Image})
    assert out == ("Image", (5, 4), "RGB")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_wrong_media_type_is_an_invalid_argument_at_the_field(servers, inputs, protocol):
    url = url_of(servers[images.ImageTools], protocol)
    with tensorwire.SyncClient(url) as client, \
            pytest.raises(tensorwire.errors.InvalidArgument) as info:
        client.predict_digit(image=inputs["txt"])
    assert [v["loc"] for v in info.value.detail] == [["image"]]
    assert "image/jpeg" in info.value.message
