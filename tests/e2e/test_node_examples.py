"""Node.js (@grpc/grpc-js, protobufjs) reads and writes what the Python client does.

One table of example API calls whose request or reply holds a tensor, a DataFrame, a
file or a nested model. Every call goes once through `tensorwire.SyncClient` over gRPC
and once through a Node client loading the `.proto` with @grpc/proto-loader: Node
encodes the request (protobufjs `fromObject` + `encode`) and decodes the reply, and the
reply it read is handed back here with the reply's bytes. Rebuilt field by field, it
must equal what Python's protobuf runtime parses from those bytes, and, read by the
Python client's own decoder, the Python client's answer: in dtype, shape, bytes and
every field.
A field protobufjs lost (a Tensor's dtype and shape, when the server wrote the message
in two occurrences) is missing from the rebuilt reply and fails the comparison; a
request the server misread changes the answer.
"""

from __future__ import annotations

import base64
import datetime as dt
import importlib
import io
import json
import math
import subprocess
import typing as t
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import tensorwire
from tensorwire.client.filedata import ClientFiles
from tensorwire.client.grpc_transport import encode_request, grpc_api
from tensorwire.protobuf.descriptors import service_proto
from tests.support import node
from tests.support.servers import RunningServer


@dataclass
class Call:
    """One API call: `client.call(api, *args, **kwargs)` on the service `target`."""

    id: str
    target: str  # module:Class of an example service
    api: str
    args: tuple[t.Any, ...] = ()
    kwargs: dict[str, t.Any] = field(default_factory=dict)

    def service(self) -> type:
        """The example class; skips the call when its framework is not installed."""
        module, name = self.target.split(":")
        try:
            return getattr(importlib.import_module(module), name)
        except ImportError as exc:
            pytest.skip(f"{self.target} needs {exc.name}")


def _png(digit: int, size: int = 40) -> bytes:
    from examples.images import draw_digit

    out = io.BytesIO()
    draw_digit(digit, size).save(out, "PNG")
    return out.getvalue()


def _jpeg(digit: int) -> bytes:
    from examples.images import draw_digit

    out = io.BytesIO()
    draw_digit(digit).convert("RGB").save(out, "JPEG", quality=95)
    return out.getvalue()


def _mp3(frames: int = 12) -> bytes:
    """An ID3 tag and MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz, silent payload)."""
    return b"ID3\x03\x00\x00\x00\x00\x00\x00" + (b"\xff\xfb\x90\x64" + b"\x00" * 413) * frames


ROW = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5]],
                np.float32)
VEC = np.array([1.0, 0.0, 0.5], np.float16)
CANDIDATES = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [0.25, 0.25, 0.875]], np.float16)
FLOWERS = pd.DataFrame({"species": ["setosa", "virginica"], "length": [5.1, 6.7],
                        "width": [3.5, 3.0]})
ORDERS = pd.DataFrame({"item": ["a", "b", "c"], "qty": [2, 3, 0], "price": [1.5, 2.0, 9.75]})
TF_ROWS = np.array([[1.0, 2.0, 3.0], [4.0, -5.5, 6.25]], np.float32)
WORDS = np.array(["héllo", "tensor", ""])
IRIS, RETRIEVAL = "examples.iris:Iris", "examples.descriptors:Retrieval"
FRAMES, TF = "examples.frames:Frames", "examples.tf_tensors:TfOps"
IMAGES, AUDIO = "examples.images:ImageTools", "examples.audio:AudioFiles"
MODELS = "examples.models:ReviewAnalyzer"

CALLS = [
    # tensors in and out, keyword and root inputs
    Call("iris-classify", IRIS, "classify", kwargs={"x": ROW}),
    Call("iris-predict", IRIS, "predict", args=(ROW,)),
    Call("iris-species", IRIS, "species", kwargs={"x": ROWS}),
    # a model holding a tensor, in; a tensor beside a model holding a tensor, out
    Call("retrieval-nearest", RETRIEVAL, "nearest",
         kwargs={"query": {"vector": VEC, "label": "q"}, "candidates": CANDIDATES}),
    Call("retrieval-normalize", RETRIEVAL, "normalize", kwargs={"vector": VEC, "label": "Hi"}),
    # DataFrames: one Tensor per column, strings included
    Call("frames-ratios", FRAMES, "ratios", kwargs={"df": FLOWERS}),
    Call("frames-totals", FRAMES, "totals", kwargs={"df": ORDERS}),
    Call("frames-count", FRAMES, "count", args=(ORDERS,)),
    # TensorFlow tensors, numbers and strings
    Call("tf-scale", TF, "scale", kwargs={"x": TF_ROWS, "factor": 0.5}),
    Call("tf-row-sums", TF, "row_sums", args=(TF_ROWS,)),
    Call("tf-shout", TF, "shout", kwargs={"words": WORDS}),
    # files and images in, files and models out
    Call("images-upload", IMAGES, "upload_image", args=(("d.png", _png(3), "image/png"),)),
    Call("images-resize", IMAGES, "resize",
         kwargs={"image": ("d.png", _png(5), "image/png"), "width": 20, "height": 12}),
    Call("images-predict-digit", IMAGES, "predict_digit",
         kwargs={"image": ("d.jpg", _jpeg(7), "image/jpeg")}),
    Call("images-describe", IMAGES, "describe",
         kwargs={"image": ("d.png", _png(1), "image/png"), "caption": "one",
                 "tags": ["digit", "png"]}),
    Call("images-sizes", IMAGES, "sizes",
         kwargs={"images": [("a.png", _png(2, 30), "image/png"),
                            ("b.png", _png(8, 50), "image/png")]}),
    Call("images-file-sizes", IMAGES, "file_sizes",
         kwargs={"files": [("a.txt", b"abc", "text/plain"),
                           ("b.png", _png(4), "image/png")]}),
    Call("images-thumbnails", IMAGES, "thumbnails",
         kwargs={"image": ("d.png", _png(9, 300), "image/png")}),
    Call("audio-transcribe", AUDIO, "transcribe",
         kwargs={"audio": ("talk.mp3", _mp3(), "audio/mpeg")}),
    Call("audio-speak", AUDIO, "speak", kwargs={"text": "hi", "rate": 4000}),
    Call("audio-append", AUDIO, "append",
         kwargs={"file": ("notes.txt", b"first\n", "text/plain"), "line": "second"}),
    Call("audio-checksum", AUDIO, "checksum", args=(("blob.bin", bytes(range(256)) * 3),)),
    # a nested model (with a Timestamp and a list) in, a model with a map out
    Call("models-analyze", MODELS, "analyze",
         kwargs={"params": {"text": "great shoes", "stars": 5, "tags": ["red", "shoes"],
                            "posted": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)}}),
]

NODE_SCRIPT = r"""
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');
const {includeDir, calls} = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const options = __OPTIONS__;
const clients = {};

function client(c) {
  const key = `${c.proto} ${c.target}`;
  if (!clients[key]) {
    const pkg = grpc.loadPackageDefinition(loader.loadSync(c.proto, options));
    const Service = c.service.split('.').reduce((o, k) => o[k], pkg);
    clients[key] = new Service(c.target, grpc.credentials.createInsecure());
  }
  return clients[key];
}

// The generated method's own serialiser (protobufjs fromObject + encode) and
// deserialiser (decode + toObject), with the reply's bytes kept to compare.
function call(c) {
  const stub = client(c);
  const method = stub.constructor.service[c.method];
  return new Promise((resolve) => {
    stub.makeUnaryRequest(method.path, method.requestSerialize, (raw) => raw, c.request,
                          new grpc.Metadata(), {deadline: Date.now() + 30000}, (err, raw) => {
      resolve(err ? {error: {code: err.code, details: err.details}}
                  : {reply: method.responseDeserialize(raw), wire: raw.toString('base64')});
    });
  });
}

(async () => {
  const out = {};
  for (const c of calls) out[c.id] = await call(c);
  console.log(JSON.stringify(out));
  process.exit(0);
})();
""".replace("__OPTIONS__", node.JS_OPTIONS)


class Remote:
    """One example service as its clients see it: the Python client, and the API
    objects the client builds from the service's descriptors (what reflection gives)."""

    def __init__(self, server: RunningServer, files: ClientFiles) -> None:
        self.spec = server.spec
        self.proto = service_proto(self.spec)
        self.client = tensorwire.SyncClient(f"grpc://{server.grpc_target}")
        desc = self.proto.pool.FindServiceByName(self.spec.grpc_service_name)
        self.apis = {api.name: api for api in (grpc_api(desc, m) for m in desc.methods)}
        self.target = server.grpc_target
        self.files = files


@pytest.fixture(scope="module")
def remotes(servers) -> t.Iterator[t.Callable[[Call], Remote]]:
    files = ClientFiles()
    made: dict[type, Remote] = {}

    def get(call: Call) -> Remote:
        service = call.service()
        if service not in made:
            made[service] = Remote(servers[service], files)
        return made[service]

    yield get
    for remote in made.values():
        remote.client.close()
    files.close()


@pytest.fixture(scope="module")
def node_replies(request: pytest.FixtureRequest, remotes, tmp_path_factory
                 ) -> dict[str, t.Any]:
    """Every call of the table made by one Node process: reply or error, by call id."""
    modules = node.node_modules(request)
    protos = tmp_path_factory.mktemp("node-protos")
    jobs = []
    for call in CALLS:
        try:
            remote = remotes(call)
        except pytest.skip.Exception:
            continue
        api = remote.apis[call.api]
        msg = encode_request(api, api.bind(call.args, call.kwargs), remote.files)
        jobs.append({"id": call.id, "proto": str(node.write_protos(protos, remote.spec)),
                     "service": remote.spec.grpc_service_name,
                     "method": remote.proto.method_names[call.api].rsplit("/", 1)[1],
                     "target": remote.target, "request": node.to_js(msg)})
    (modules / "examples_client.js").write_text(NODE_SCRIPT)
    jobs_file = protos / "jobs.json"
    jobs_file.write_text(json.dumps({"includeDir": str(protos), "calls": jobs}))
    out = subprocess.run([node.NODE, "examples_client.js", str(jobs_file)], cwd=modules,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_same(got: t.Any, want: t.Any, where: str = "reply") -> None:
    """Equal in type, and for arrays in dtype, shape and bytes; files by content."""
    assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
    if isinstance(want, np.ndarray):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), where
        assert got.tobytes() == want.tobytes(), where
    elif isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(got, want, check_exact=True, obj=where)
    elif isinstance(want, Path):
        assert (got.name, got.read_bytes()) == (want.name, want.read_bytes()), where
    elif isinstance(want, Image.Image):
        assert (got.mode, got.size, got.tobytes()) == (want.mode, want.size,
                                                       want.tobytes()), where
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list | tuple):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), where
    else:
        assert got == want, where


@pytest.mark.slow
@pytest.mark.parametrize("call", CALLS, ids=[c.id for c in CALLS])
def test_node_reads_and_writes_what_python_does(call: Call, remotes, node_replies) -> None:
    remote = remotes(call)
    want = remote.client.call(call.api, *call.args, **call.kwargs)
    answer = node_replies[call.id]
    assert "error" not in answer, answer["error"]
    api = remote.apis[call.api]
    response_cls = api.wire["response_cls"]
    msg = node.from_js(answer["reply"], response_cls())
    # protobufjs read every field Python's runtime reads from the same bytes ...
    assert msg == response_cls.FromString(base64.b64decode(answer["wire"]))
    # ... and the values are the Python client's answer to the same call.
    got = api.output.decode(msg, remote.files)
    assert_same(got, want)
