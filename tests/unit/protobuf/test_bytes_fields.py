"""Big bytes fields past the protobuf runtime: the wire stays ordinary protobuf."""

from __future__ import annotations

import typing as t

import numpy as np
import pytest

import tensorwire
from tensorwire.codecs import REPLY
from tensorwire.errors import InvalidArgument
from tensorwire.protobuf import bytes_fields as protowire
from tensorwire.protobuf.descriptors import service_proto
from tensorwire.protobuf.messages import Parsed
from tensorwire.validators import DType


class Pair(tensorwire.IODescriptor):
    a: t.Annotated[np.ndarray, DType("float32")]
    b: np.ndarray | None = None
    note: str = ""


@tensorwire.service
class Wire:
    @tensorwire.api
    def echo(self, x: np.ndarray, y: np.ndarray | None = None, n: int = 0) -> np.ndarray:
        return x

    @tensorwire.api
    def pair(self, x: np.ndarray) -> Pair:
        return Pair(a=x.astype(np.float32), b=x[::-1].copy(), note="n")


MESSAGES = service_proto(tensorwire.get_service_spec(Wire)).messages
X = np.arange(12, dtype=np.float64).reshape(3, 4)


def test_request_bytes_are_what_the_plain_runtime_parses() -> None:
    m = MESSAGES["echo"]
    wire = m.request_bytes({"x": X, "y": X[:1], "n": 3})
    assert m.request_cls.FromString(wire) == m.request({"x": X, "y": X[:1], "n": 3})


def test_split_parse_views_the_received_buffer() -> None:
    m = MESSAGES["echo"]
    wire = m.request({"x": X, "n": 3}).SerializeToString()
    parsed = m.parse_request(wire)
    assert isinstance(parsed, Parsed) and set(parsed.raw) == {"x"}
    assert parsed.raw["x"].obj is wire  # a view, not a copy
    assert not parsed.msg.x.data and parsed.msg.n == 3
    values = m.request_values(parsed, REPLY)
    np.testing.assert_array_equal(values["x"], X)
    assert values["n"] == 3 and "y" not in values


def test_response_fragments_merge_into_the_same_message() -> None:
    for api, value in (("echo", X), ("pair", Pair(a=np.ones(2, np.float32),
                                                  b=np.zeros(3), note="q"))):
        m = MESSAGES[api]
        wire = m.response_bytes(value)
        assert m.response_cls.FromString(wire) == m.response(value)
        plain = m.response_value(m.response_cls.FromString(wire))
        fast = m.parse_response(wire)
        if api == "echo":
            np.testing.assert_array_equal(fast, plain)
        else:
            assert fast.keys() == plain.keys()
            for key in ("a", "b"):
                np.testing.assert_array_equal(fast[key], plain[key])
            assert fast["note"] == plain["note"] == "q"


def test_a_field_sent_twice_merges_as_protobuf_does() -> None:
    m = MESSAGES["echo"]
    first = m.request({"x": X}).SerializeToString()
    field = next(f for f in m._request_split.values() if f.name == "x")
    second = b"".join(protowire.fragment(field, (X + 1).tobytes()))  # data again: last wins
    merged = first + second
    expected = m.request_values(m.request_cls.FromString(merged), REPLY)["x"]
    got = m.request_values(m.parse_request(merged), REPLY)["x"]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, X + 1)


def test_tensors_without_data_take_the_plain_path() -> None:
    m = MESSAGES["echo"]
    for x in (np.zeros((0, 3)), np.array(["a", "b"])):
        wire = m.request_bytes({"x": x})
        parsed = m.parse_request(wire)
        assert not isinstance(parsed, Parsed)
        np.testing.assert_array_equal(m.request_values(parsed, REPLY)["x"], x)


@pytest.mark.parametrize("wire", [
    b"\x0a",  # a length-delimited field cut off before its length
    b"\x0a\x05\x18\x01",  # length past the end
    b"\x0a\x04\x1a\x10abc",  # the inner data field runs past its message
    b"\x0b\x0c",  # groups are not supported
    b"\x00\x01",  # field number 0
])
def test_malformed_framing_is_invalid_argument(wire: bytes) -> None:
    with pytest.raises(InvalidArgument, match="not a valid"):
        MESSAGES["echo"].parse_request(wire)


def test_varint_round_trip() -> None:
    for value in (0, 1, 127, 128, 300, 2**35, 2**63 - 1):
        encoded = protowire.varint(value)
        assert protowire._read_varint(memoryview(encoded), 0, len(encoded)) == (
            value, len(encoded))
