"""The TensorFlow example (examples/tf_tensors.py) through both clients and protocols.

Skipped where TensorFlow is not installed; with it, every call must give the same Python
result over HTTP and gRPC: numpy arrays with their dtype and shape (the client loads no
framework, so tf.Tensor outputs come back as numpy; tf.Tensor inputs are accepted).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorwire
from tests.support.client_calls import call_client
from tests.support.servers import url_of

tf = pytest.importorskip("tensorflow")

from examples.tf_tensors import TfOps  # noqa: E402

X = np.array([[1.0, 2.0, 3.0], [4.0, -5.5, 6.25]], np.float32)


def norm(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.kind if value.dtype.kind in "US" else str(value.dtype),
                value.shape, value.tolist())
    return value


CALLS = [
    ("scale", "scale", (), {"x": X, "factor": 0.5},
     ("ndarray", "float32", (2, 3), [[0.5, 1.0, 1.5], [2.0, -2.75, 3.125]])),
    ("scale-default", "scale", (), {"x": X},
     ("ndarray", "float32", (2, 3), [[2.0, 4.0, 6.0], [8.0, -11.0, 12.5]])),
    ("scale-tf-input", "scale", (), {"x": tf.constant(X), "factor": 1.0},
     ("ndarray", "float32", (2, 3), X.tolist())),
    ("row_sums-root", "row_sums", (X,), {}, ("ndarray", "float32", (2,), [6.0, 4.75])),
    ("row_sums-tf-root", "row_sums", (tf.constant(X[:1]),), {},
     ("ndarray", "float32", (1,), [6.0])),
    # tf.strings.upper changes ASCII letters only
    ("shout", "shout", (), {"words": np.array(["héllo", "tensor", ""])},
     ("ndarray", "U", (3,), ["HéLLO", "TENSOR", ""])),
    ("shout-list", "shout", (), {"words": ["ab"]}, ("ndarray", "U", (1,), ["AB"])),
]


def call(url: str, kind: str, api: str, args: tuple, kwargs: dict) -> Any:
    return call_client(url, kind, api, args, kwargs, norm)


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("id_", "api", "args", "kwargs", "expect"), CALLS,
                         ids=[c[0] for c in CALLS])
def test_tf_tensors_answer_the_same(servers, id_, api, args, kwargs, expect, protocol,
                                    client_kind):
    url = url_of(servers[TfOps], protocol)
    assert call(url, client_kind, api, args, kwargs) == expect


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_wrong_shape_is_an_invalid_argument_at_the_field(servers, protocol):
    url = url_of(servers[TfOps], protocol)
    with tensorwire.SyncClient(url) as client, \
            pytest.raises(tensorwire.errors.InvalidArgument) as info:
        client.scale(x=np.ones((2, 4), np.float32))
    assert [v["loc"] for v in info.value.detail] == [["x"]]
