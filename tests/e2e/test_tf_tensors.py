"""tf.Tensor services over HTTP JSON, HTTP .npy and gRPC (TensorFlow loads only here)."""

from __future__ import annotations

import typing as t

import numpy as np
import pytest

from tensorwire.contract.decoding import Decoder
from tests.support.tensor_wire import Lie

from .tensor_cases import Case, run_case, sender_pool

tf = pytest.importorskip("tensorflow")

from examples.tf_tensors import TfOps  # noqa: E402

SERVICES: dict[str, type] = {"tf": TfOps}
X = np.array([[1.0, 2.0, 3.0], [4.0, -5.5, 6.25]], np.float32)
WORDS = np.array(["héllo", "tensor", ""])


def scaled(x: np.ndarray, factor: float) -> t.Callable[[TfOps], np.ndarray]:
    return lambda svc: svc.scale(tf.constant(x), factor).numpy()


CASES = [
    Case("scale", "tf", "scale", {"x": X, "factor": 0.5}, expect=scaled(X, 0.5)),
    Case("scale-default", "tf", "scale", {"x": X}, expect=scaled(X, 2.0)),
    Case("root", "tf", "row_sums", {"x": X},
         expect=lambda svc: svc.row_sums(tf.constant(X)).numpy()),
    Case("strings", "tf", "shout", {"words": WORDS},
         expect=lambda svc: np.array([w.decode() for w in
                                      svc.shout(tf.constant(WORDS)).numpy()])),
    Case("wrong-shape", "tf", "scale", {"x": np.zeros((2, 4), np.float32)}, error=["x"],
         msg="expected shape (*, 3), got (2, 4)"),
    Case("wrong-rank", "tf", "row_sums", {"x": np.zeros(3, np.float32)}, error=["x"],
         msg="expected rank 2"),
    Case("wrong-dtype", "tf", "scale", {"x": X.astype(np.float16)}, error=["x"],
         msg="expected dtype float32, got float16", wires=("npy", "grpc")),
    Case("strings-for-numbers", "tf", "shout", {"words": np.array([1, 2])}, error=["words"],
         msg={"json": "expected string elements, got integers",
              "npy": "expected dtype string, got int64",
              "grpc": "expected dtype string, got int64"}),
    Case("lying-shape", "tf", "row_sums", {"x": Lie(X, (3, 3))}, error=["x"],
         msg={"npy": "(36 bytes) but 24 bytes follow", "grpc": "needs 36 bytes, data has 24"},
         wires=("npy", "grpc")),
    Case("ragged", "tf", "scale", {"x": [[1, 2, 3], [4, 5]]}, error=["x"],
         msg="ragged nested lists", wires=("json", "npy")),
    Case("object-dtype", "tf", "row_sums", {"x": np.array([[1, None, 3]], dtype=object)},
         error=["x"], msg={"npy": "object arrays are refused",
                           "grpc": "unknown dtype number 99",
                           "json": "null is not a tensor element"}),
]


@pytest.fixture(scope="module")
def pool() -> t.Iterator[t.Any]:
    yield from sender_pool(SERVICES)


@pytest.mark.parametrize(("case", "wire"), [p for c in CASES for p in c.params()])
def test_same_answer_on_every_wire(case: Case, wire: str, pool: t.Any) -> None:
    run_case(case, wire, pool, SERVICES)


def test_the_service_receives_tf_tensors(pool: t.Any) -> None:
    spec = pool("tf").spec
    value = Decoder(spec.apis["scale"]).decode_json(b'{"x": [[1, 2, 3]]}')["x"]
    assert isinstance(value, tf.Tensor) and value.dtype == tf.float32
