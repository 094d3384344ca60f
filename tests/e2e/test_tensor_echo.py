"""Property, against a live server: random tensors echo back bit-exactly on every wire.

One echo API per dtype (the dtype must be declared for JSON, whose numbers carry none);
HTTP .npy and gRPC keep every bit, JSON every bit but a NaN's sign and payload.
"""

from __future__ import annotations

import typing as t

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorwire
from tensorwire.validators import DType
from tensorwire.wire import dtypes
from tests.support.servers import serving
from tests.support.tensor_wire import Sender
from tests.unit.codecs.test_tensor_properties import same_bits, tensors


def _echo_service() -> type:
    namespace: dict[str, t.Any] = {}
    for spec in dtypes.TABLE:
        annotation = t.Annotated[np.ndarray, DType(spec.name)]

        def echo(self: t.Any, x: t.Any, /) -> t.Any:
            return x

        echo.__annotations__ = {"x": annotation, "return": annotation}
        echo.__name__ = f"echo_{spec.name}"
        namespace[echo.__name__] = tensorwire.api(echo)
    return tensorwire.service(type("Echo", (), namespace))


Echo = _echo_service()


@pytest.fixture(scope="module")
def sender() -> t.Iterator[Sender]:
    with serving(Echo) as server:
        s = Sender(server)
        yield s
        s.close()


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=tensors(), wire=st.sampled_from(["json", "npy", "grpc"]))
def test_echo_is_bit_exact(sender: Sender, case: tuple[dtypes.DTypeSpec, np.ndarray],
                           wire: str) -> None:
    spec, array = case
    if wire == "json" and array.size == 0:
        array = np.zeros((1,) * array.ndim, array.dtype)  # `[]` has no inner dims in JSON
    outcome = sender.call(wire, f"echo_{spec.name}", {"x": array})
    assert outcome.ok, (outcome.status, outcome.msgs)
    got = outcome.value
    if wire == "json":
        ta = sender.spec.apis[f"echo_{spec.name}"].output.adapter
        import orjson

        got = ta.validate_json(orjson.dumps(got))
    same_bits(np.asarray(got), array, nan_as_nan=wire == "json")
