"""Tensors, frames and IODescriptors over HTTP JSON, HTTP .npy and gRPC: one table.

Every case runs against the real server on each wire it applies to: the same inputs,
the same answer, or the same rejection at the same location.
"""

from __future__ import annotations

import typing as t

import numpy as np
import pandas as pd
import pytest
import torch

from examples.descriptors import Embedding, Retrieval
from examples.frames import Frames
from examples.iris import Iris
from tests.support.tensor_wire import Lie

from .tensor_cases import Case, run_case, sender_pool

SERVICES: dict[str, type] = {"iris": Iris, "frames": Frames, "retrieval": Retrieval}

X = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 2.8, 4.3, 1.3]], np.float32)
FLOWERS = pd.DataFrame({"species": ["setosa", "virginica"], "length": [5.1, 6.3],
                        "width": [3.5, 3.3]})
ORDERS = pd.DataFrame({"item": ["tea", "cake"], "qty": np.array([2, 3], np.int64),
                       "price": [1.5, 2.25]})
VEC = np.array([1.0, 0.5, -2.0], np.float16)
CANDIDATES = np.array([[1.0, 0.5, -2.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 2.0]], np.float16)
QUERY = {"vector": VEC, "label": "Query"}


def probabilities(x: np.ndarray) -> t.Callable[[Iris], np.ndarray]:
    return lambda svc: svc._probabilities(torch.from_numpy(x))


IRIS = [
    Case("classify", "iris", "classify", {"x": X}, expect=probabilities(X)),
    Case("predict-root", "iris", "predict", {"x": X}, expect=probabilities(X)),
    Case("species", "iris", "species", {"x": ROWS},
         expect=lambda svc: svc.species(torch.from_numpy(ROWS))),
    Case("wrong-shape", "iris", "classify", {"x": np.zeros((1, 3), np.float32)},
         error=["x"], msg="expected shape (1, 4), got (1, 3)"),
    Case("wrong-shape-root", "iris", "predict", {"x": np.zeros((2, 4), np.float32)},
         error=["x"], msg="expected shape (1, 4), got (2, 4)"),
    Case("wrong-rank", "iris", "classify", {"x": np.zeros(4, np.float32)},
         error=["x"], msg="expected rank 2 (shape (1, 4)), got rank 1 (shape (4,))"),
    Case("wrong-dtype", "iris", "classify", {"x": X.astype(np.float64)},
         error=["x"], msg={"npy": "expected dtype float32, got float64",
                           "grpc": "expected dtype float32, got float64",
                           "json": "'a' is not a number"},
         per_wire={"json": {"x": [["a", 3.5, 1.4, 0.2]]}}),
    Case("wrong-dtype-root", "iris", "predict", {"x": X.astype(np.int32)},
         error=["x"], msg="expected dtype float32, got int32", wires=("npy", "grpc")),
    Case("lying-shape", "iris", "classify", {"x": Lie(X, (2, 4))}, error=["x"],
         msg={"npy": "header says shape [2, 4] of <f4 (32 bytes) but 16 bytes follow",
              "grpc": "shape [2, 4] of float32 needs 32 bytes, data has 16"},
         wires=("npy", "grpc")),
    Case("lying-bytes-root", "iris", "predict", {"x": Lie(X, (1, 3))}, error=["x"],
         msg={"npy": "(12 bytes) but 16 bytes follow", "grpc": "needs 12 bytes, data has 16"},
         wires=("npy", "grpc")),
    Case("ragged", "iris", "classify", {"x": [[5.1, 3.5, 1.4, 0.2], [1.0, 2.0]]},
         error=["x"], msg="ragged nested lists: [1] has 2 elements where [0] has 4",
         wires=("json", "npy")),  # npy wire: a JSON multipart part beside .npy ones
    Case("ragged-root", "iris", "predict", {"x": [[5.1, 3.5], [1.0]]}, error=["x"],
         msg="ragged nested lists", wires=("json",)),
    Case("object-dtype", "iris", "classify",
         {"x": np.array([[5.1, "a", None, 0.2]], dtype=object)}, error=["x"],
         msg={"npy": "object arrays are refused", "grpc": "unknown dtype number 99",
              "json": "null is not a tensor element"}),
    Case("object-dtype-root", "iris", "predict",
         {"x": np.array([[{"pickle": 1}, 2, 3, 4]], dtype=object)}, error=["x"],
         msg={"npy": "object arrays are refused", "grpc": "unknown dtype number 99",
              "json": "objects are not tensor elements"}),
    Case("missing", "iris", "classify", {}, error=["x"], msg="Field required",
         wires=("json", "grpc")),
]

FRAMES = [
    Case("records", "frames", "ratios", {"df": FLOWERS},
         expect=lambda svc: svc.ratios(FLOWERS), wires=("json", "grpc")),
    Case("columns", "frames", "totals", {"df": ORDERS},
         expect=lambda svc: svc.totals(ORDERS), wires=("json", "grpc")),
    Case("frame-root", "frames", "count", {"df": ORDERS}, expect=lambda svc: 2,
         wires=("json", "grpc")),
    Case("missing-column", "frames", "ratios", {"df": FLOWERS.drop(columns=["width"])},
         error=["df"], msg="Field required", wires=("json", "grpc")),
    Case("extra-column", "frames", "totals", {"df": ORDERS.assign(tax=[0.1, 0.2])},
         error=["df", "tax"], msg="Extra inputs are not permitted", wires=("json", "grpc")),
    Case("ragged-columns", "frames", "totals",
         {"df": {"item": ["tea", "cake"], "qty": [2], "price": [1.5, 2.25]}}, error=["df"],
         msg="ragged columns: 'qty' has 1 values where 'item' has 2", wires=("json", "grpc")),
    Case("column-dtype", "frames", "totals", {"df": ORDERS.assign(qty=[2.5, 3.0])},
         error=["df"], msg="column 'qty': int64 elements must be whole numbers",
         wires=("json", "grpc")),
    Case("wrong-orient", "frames", "ratios", {"df": FLOWERS.to_dict(orient="list")},
         error=["df"], msg="expected a list of records (orient='records')", wires=("json",)),
]


def _nearest(svc: Retrieval) -> t.Any:
    return svc.nearest(Embedding(**QUERY), CANDIDATES)


RETRIEVAL = [
    Case("iodescriptor-in-and-out", "retrieval", "nearest",
         {"query": QUERY, "candidates": CANDIDATES}, expect=_nearest),
    Case("input-spec", "retrieval", "normalize", {"vector": VEC, "label": "Q"},
         expect=lambda svc: svc.normalize(vector=VEC, label="Q")),
    Case("nested-wrong-dtype", "retrieval", "nearest",
         {"query": {"vector": VEC.astype(np.float32), "label": "q"}, "candidates": CANDIDATES},
         error=["query", "vector"],
         msg={"grpc": "expected dtype float16, got float32", "json": "'x' is not a number",
              "npy": "'x' is not a number"},
         per_wire={w: {"query": {"vector": ["x", 1], "label": "q"}, "candidates": CANDIDATES}
                   for w in ("json", "npy")}),
    Case("top-level-wrong-dtype", "retrieval", "normalize",
         {"vector": VEC.astype(np.float32), "label": "q"}, error=["vector"],
         msg="expected dtype float16, got float32", wires=("npy", "grpc")),
    Case("float16-range", "retrieval", "normalize", {"vector": [1.0, 1e6], "label": "q"},
         error=["vector"], msg="out of range for float16", wires=("json", "npy")),
    Case("candidates-rank", "retrieval", "nearest",
         {"query": QUERY, "candidates": VEC}, error=["candidates"],
         msg="expected rank 2 (shape (*, *)), got rank 1 (shape (3,))"),
    Case("nested-missing-field", "retrieval", "nearest",
         {"query": {"vector": VEC}, "candidates": CANDIDATES}, error=["query", "label"],
         msg="Field required"),
]

CASES = IRIS + FRAMES + RETRIEVAL


@pytest.fixture(scope="module")
def pool() -> t.Iterator[t.Any]:
    yield from sender_pool(SERVICES)


@pytest.mark.parametrize(("case", "wire"), [p for c in CASES for p in c.params()])
def test_same_answer_on_every_wire(case: Case, wire: str, pool: t.Any) -> None:
    run_case(case, wire, pool, SERVICES)


def test_a_json_client_can_ask_for_npy_and_a_npy_client_for_json(pool: t.Any) -> None:
    import io
    import urllib.request

    url = pool("iris").server.http_url
    body = b'{"x": [[5.1, 3.5, 1.4, 0.2]]}'
    req = urllib.request.Request(url + "/classify", data=body, headers={
        "Content-Type": "application/json", "Accept": "application/x-npy"})
    with urllib.request.urlopen(req) as resp:
        assert resp.headers["Content-Type"] == "application/x-npy"
        out = np.load(io.BytesIO(resp.read()), allow_pickle=False)
    np.testing.assert_array_equal(out, probabilities(X)(Iris()))
    buf = io.BytesIO()
    np.save(buf, X)
    req = urllib.request.Request(url + "/predict", data=buf.getvalue(), headers={
        "Content-Type": "application/x-npy"})
    with urllib.request.urlopen(req) as resp:
        assert resp.headers["Content-Type"] == "application/json"
        assert np.array(__import__("json").loads(resp.read()), np.float32).tolist() == \
            out.tolist()


def test_unsupported_body_media_type_is_415(pool: t.Any) -> None:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(pool("iris").server.http_url + "/predict", data=b"x",
                                 headers={"Content-Type": "image/png"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req)
    assert exc.value.code == 415
    assert b"application/x-npy" in exc.value.read()


def test_schema_documents_tensors_and_frames(pool: t.Any) -> None:
    import json
    import urllib.request

    def schema(name: str) -> t.Any:
        with urllib.request.urlopen(pool(name).server.http_url + "/schema.json") as resp:
            return {r["name"]: r for r in json.loads(resp.read())["routes"]}

    iris = schema("iris")
    x = iris["classify"]["input"]["properties"]["x"]
    # BentoML's own form of a tensor and a frame, which its client needs
    assert (x["type"], x["format"], x["dtype"], x["shape"], x["dim"]) == (
        "tensor", "torch-tensor", "float32", [1, 4], 4)
    assert (iris["classify"]["output"]["type"], iris["classify"]["output"]["format"]) == (
        "tensor", "numpy-array")
    frames = schema("frames")
    df = frames["totals"]["input"]["properties"]["df"]
    assert (df["type"], df["orient"], df["columns"]) == (
        "dataframe", "columns", ["item", "qty", "price"])
    vector = schema("retrieval")["nearest"]["input"]["properties"]["query"]["properties"]
    assert vector["vector"]["dtype"] == "float16"
    with urllib.request.urlopen(pool("iris").server.http_url + "/docs.json") as resp:
        paths = json.loads(resp.read())["paths"]
    predict = paths["/predict"]["post"]
    body = predict["requestBody"]["content"]["application/json"]["schema"]
    assert (body["type"], body["items"]["maxItems"]) == ("array", 4)  # OpenAPI: JSON Schema
    assert set(predict["requestBody"]["content"]) == {"application/json", "application/x-npy"}
    assert set(predict["responses"]["200"]["content"]) == {"application/json",
                                                           "application/x-npy"}


def test_the_server_keeps_serving_after_every_rejection(pool: t.Any) -> None:
    sender = pool("iris")
    for wire in ("json", "npy", "grpc"):
        assert sender.call(wire, "classify", {"x": X}).ok


@pytest.mark.slow
def test_the_iris_example_serves_from_the_cli() -> None:
    import io
    import urllib.request

    from tensorwire.wire import npy
    from tests.support.servers import spawn_cli

    server = spawn_cli("examples.iris:Iris")
    try:
        buf = io.BytesIO()
        np.save(buf, X)
        req = urllib.request.Request(server.http_url + "/predict", data=buf.getvalue(),
                                     headers={"Content-Type": npy.NPY, "Accept": npy.NPY})
        with urllib.request.urlopen(req, timeout=30) as resp:
            out = np.load(io.BytesIO(resp.read()), allow_pickle=False)
        np.testing.assert_array_equal(out, probabilities(X)(Iris()))
    finally:
        server.stop()
