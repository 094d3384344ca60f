"""The tensor and DataFrame examples (issue 4's codecs) through both clients and protocols.

Skipped where those examples are not present; with them, every call must give the same
Python result over HTTP (JSON in, `.npy` out) and gRPC (`tensorwire.v1.Tensor` /
`.DataFrame`): numpy arrays with their dtype and shape, DataFrames with their columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorwire
from tests.support.client_calls import call_client
from tests.support.servers import url_of

iris = pytest.importorskip("examples.iris", reason="the tensor codecs are not here")
descriptors = pytest.importorskip("examples.descriptors", reason="the tensor codecs are not here")
frames = pytest.importorskip("examples.frames", reason="the DataFrame codec is not here")
similarity = pytest.importorskip("examples.similarity")
pd = pytest.importorskip("pandas")
torch = pytest.importorskip("torch")


def norm(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.shape, np.round(value.astype("f8"), 4).tolist()
                if value.dtype.kind in "fiub" else value.tolist())
    if isinstance(value, pd.DataFrame):
        return ("DataFrame", list(value.columns), value.to_dict(orient="list"))
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, list):
        return [norm(v) for v in value]
    return value


X = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
PROBS = ("ndarray", "float32", (1, 3), [[0.9476, 0.0521, 0.0003]])
CALLS = [
    ("classify-numpy", iris.Iris, "classify", (), {"x": X}, PROBS),
    ("classify-torch", iris.Iris, "classify", (), {"x": torch.tensor(X)}, PROBS),
    ("predict-root-npy", iris.Iris, "predict", (X,), {}, PROBS),
    # converted to the declared float32 by the client (same_kind casting), on both wires
    ("classify-float64", iris.Iris, "classify", (), {"x": X.astype(np.float64)}, PROBS),
    ("classify-list", iris.Iris, "classify", (), {"x": [[5.1, 3.5, 1.4, 0.2]]}, PROBS),
    ("classify-ints", iris.Iris, "classify", (), {"x": [[5, 3, 1, 0]]},
     ("ndarray", "float32", (1, 3), [[0.9425, 0.0573, 0.0002]])),
    ("predict-root-float64", iris.Iris, "predict", (X.astype(np.float64),), {}, PROBS),
    ("nearest-float32", descriptors.Retrieval, "nearest", (),
     {"query": {"vector": [1.0, 0.0], "label": "q"}, "candidates": np.eye(2, dtype="f4")},
     {"scores": ("ndarray", "float16", (2,), [1.0, 0.0]), "best": 0,
      "query": {"vector": ("ndarray", "float16", (2,), [1.0, 0.0]), "label": "q"}}),
    ("species", iris.Iris, "species", (), {"x": np.vstack([X, X * 2])}, ["setosa", "setosa"]),
    ("nearest-float16", descriptors.Retrieval, "nearest", (),
     {"query": {"vector": np.array([1, 0], np.float16), "label": "q"},
      "candidates": np.array([[1, 0], [0, 1]], np.float16)},
     {"scores": ("ndarray", "float16", (2,), [1.0, 0.0]), "best": 0,
      "query": {"vector": ("ndarray", "float16", (2,), [1.0, 0.0]), "label": "q"}}),
    ("normalize-input-spec", descriptors.Retrieval, "normalize", (),
     {"vector": np.array([3, 4], np.float16), "label": "AB"},
     {"vector": ("ndarray", "float16", (2,), [0.6001, 0.7998]), "label": "ab"}),
    ("nearest-own-rows", similarity.Similarity, "nearest", (),
     {"queries": similarity.embedding_table()[[3, 7]] * 2.0, "k": 1},
     {"indices": [[3], [7]], "scores": [[1.0], [1.0]]}),
    ("frame-records", frames.Frames, "ratios", (),
     {"df": pd.DataFrame({"species": ["s"], "length": [5.0], "width": [2.0]})},
     ("DataFrame", ["species", "length", "width", "ratio"],
      {"species": ["s"], "length": [5.0], "width": [2.0], "ratio": [2.5]})),
    ("frame-columns", frames.Frames, "totals", (),
     {"df": pd.DataFrame({"item": ["a", "b"], "qty": [2, 3], "price": [1.5, 2.0]})},
     ("DataFrame", ["item", "qty", "price", "total"],
      {"item": ["a", "b"], "qty": [2, 3], "price": [1.5, 2.0], "total": [3.0, 6.0]})),
    ("frame-root", frames.Frames, "count",
     (pd.DataFrame({"item": ["a"], "qty": [1], "price": [1.0]}),), {}, 1),
]


def call(url: str, kind: str, api: str, args: tuple, kwargs: dict) -> Any:
    return call_client(url, kind, api, args, kwargs, norm)


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("id_", "service", "api", "args", "kwargs", "expect"), CALLS,
                         ids=[c[0] for c in CALLS])
def test_tensors_and_frames_answer_the_same(servers, id_, service, api, args, kwargs, expect,
                                            protocol, client_kind):
    url = url_of(servers[service], protocol)
    assert call(url, client_kind, api, args, kwargs) == expect


@pytest.mark.parametrize(("api", "args", "kwargs", "loc"), [
    ("classify", (), {"x": np.zeros((1, 4), complex)}, ["x"]),
    ("classify", (), {"x": [[1j, 0, 0, 0]]}, ["x"]),
    ("predict", (np.zeros((1, 4), complex),), {}, ["x"]),
])
def test_a_dtype_that_does_not_convert_is_the_same_error_on_both_protocols(
        servers, api, args, kwargs, loc):
    """complex -> float32 is no same_kind cast: refused before sending, in the same words."""
    errors = {}
    for protocol in ("http", "grpc"):
        with tensorwire.SyncClient(url_of(servers[iris.Iris], protocol)) as client, \
                pytest.raises(tensorwire.errors.InvalidArgument) as info:
            getattr(client, api)(*args, **kwargs)
        errors[protocol] = (type(info.value), info.value.message, info.value.detail)
    assert errors["http"] == errors["grpc"]
    assert [v["loc"] for v in errors["grpc"][2]] == [loc]
    assert "expected dtype float32, got complex128" in errors["grpc"][1]


def test_nested_tensor_errors_name_the_nested_field(servers):
    for protocol in ("http", "grpc"):
        with tensorwire.SyncClient(url_of(servers[descriptors.Retrieval], protocol)) as client, \
                pytest.raises(tensorwire.errors.InvalidArgument) as info:
            client.nearest(query={"vector": np.zeros(2, complex), "label": "q"},
                           candidates=np.eye(2))
        assert [v["loc"] for v in info.value.detail] == [["query", "vector"]], protocol


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_wrong_shape_is_an_invalid_argument_at_the_field(servers, protocol):
    url = url_of(servers[iris.Iris], protocol)
    with tensorwire.SyncClient(url) as client, \
            pytest.raises(tensorwire.errors.InvalidArgument) as info:
        client.classify(x=np.ones((2, 4), np.float32))
    assert [v["loc"] for v in info.value.detail] == [["x"]]
