"""`APIMessages.request_reader`: bytes to request values as `parse_request` +
`request_values` read them, with a one-comprehension path for scalar-only inputs."""

from __future__ import annotations

import typing as t

import numpy as np
import pytest
from pydantic import BaseModel

import tensorwire
from tensorwire.errors import TensorwireError
from tensorwire.protobuf.descriptors import service_proto


class _Scope:
    """A request's decode scope with nothing to store (no file inputs here)."""

    reading_request = True
    limits: dict[str, t.Any] = {}
    state: dict[str, t.Any] = {}


class Point(BaseModel):
    x: float
    y: float = 0.0


@tensorwire.service
class Inputs:
    @tensorwire.api
    def scalars(self, a: float, b: int = 3, c: str = "c", d: bool = False) -> int:
        raise NotImplementedError

    @tensorwire.api
    def blob(self, e: bytes = b"") -> int:
        raise NotImplementedError

    @tensorwire.api
    def listed(self, xs: list[float], label: str = "") -> int:
        raise NotImplementedError

    @tensorwire.api
    def optional(self, a: int | None = None) -> int:
        raise NotImplementedError

    @tensorwire.api
    def point(self, p: Point) -> int:
        raise NotImplementedError

    @tensorwire.api
    def tensor(self, t: np.ndarray) -> int:
        raise NotImplementedError


MESSAGES = service_proto(tensorwire.get_service_spec(Inputs)).messages
SCOPE = _Scope()


def _general(api: str, data: bytes) -> dict[str, t.Any]:
    messages = MESSAGES[api]
    return messages.request_values(messages.parse_request(data), SCOPE)


@pytest.mark.parametrize("fields", [
    {}, {"a": 1.5}, {"a": 0.0, "b": 0, "c": "", "d": False},
    {"a": -2.0, "b": 7, "c": "héllo", "d": True},
])
def test_scalar_inputs_read_as_the_general_path_reads_them(fields: dict[str, t.Any]
                                                             ) -> None:
    messages = MESSAGES["scalars"]
    data = messages.request_cls(**fields).SerializeToString()
    read = messages.request_reader()
    assert read(data, SCOPE) == _general("scalars", data) == fields  # zeros sent count


def test_scalar_inputs_take_the_one_comprehension_path() -> None:
    assert MESSAGES["scalars"].request_reader().__name__ == "read_scalars"


@pytest.mark.parametrize(("api", "fields"), [
    ("listed", {"xs": [1.0, 2.0], "label": "l"}), ("listed", {}),
    ("optional", {"a": 4}), ("optional", {}),
    ("point", {"p": {"x": 1.0}}), ("blob", {"e": b"\x00\x01"}), ("blob", {}),
])
def test_other_inputs_keep_the_general_path(api: str, fields: dict[str, t.Any]) -> None:
    messages = MESSAGES[api]
    read = messages.request_reader()
    assert read.__name__ == "general"
    data = messages.request_cls(**fields).SerializeToString()
    assert read(data, SCOPE) == _general(api, data)


def test_a_split_tensor_input_keeps_the_general_path() -> None:
    messages = MESSAGES["tensor"]
    read = messages.request_reader()
    assert read.__name__ == "general"
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = messages.request_bytes({"t": array})
    np.testing.assert_array_equal(read(data, SCOPE)["t"], array)


@pytest.mark.parametrize("api", ["scalars", "listed"])
def test_bytes_that_are_not_the_message_are_refused_alike(api: str) -> None:
    messages = MESSAGES[api]
    garbage = b"\xff\xff\xff"
    with pytest.raises(TensorwireError) as general:
        messages.parse_request(garbage)
    with pytest.raises(TensorwireError) as bound:
        messages.request_reader()(garbage, SCOPE)
    assert bound.value.grpc_code == general.value.grpc_code == "INVALID_ARGUMENT"
    assert str(bound.value) == str(general.value)
