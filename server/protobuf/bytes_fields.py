"""Big bytes fields past the protobuf runtime: one copy out, none in.

Building a Tensor message the ordinary way copies its data three times (`tobytes`, the
field setter, `SerializeToString`), and reading it twice (the parse, the field getter).
For the fields where this matters — a top-level singular message field whose codec
names a `raw_bytes_field` (`Tensor.data`) — the bytes bypass the runtime:

- writing: the message is serialised without them and each is appended whole, as one
  trailing field built from fragments: `field { <the element's other fields>
  raw_bytes_field: <bytes> }`, the bytes a view, never copied before the final join.
  The field occurs once: protobufjs (Node, browsers, grpc-web) does not merge repeated
  occurrences of a singular message field as the spec asks, it keeps the last, so a
  header occurrence followed by a data occurrence would reach it as data alone.
- reading: the fragments of such fields are located in the received bytes and cut out
  before the (now small) rest is parsed; the codec gets a memoryview of the received
  buffer, so the array is a view of the very bytes grpc handed over.

Only the wire format's framing is read here (tags and lengths), never the payload.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_LEN = 2


@dataclass(frozen=True)
class SplitField:
    """A top-level field whose element message has a raw bytes field."""

    name: str
    number: int
    #: Field number of the bytes field inside the element message.
    inner: int
    codec: Any


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def iter_fields(buf: memoryview, start: int, end: int
                ) -> Iterator[tuple[int, int, int, int, int]]:
    """(number, wire type, value start, value end, field start) for each field."""
    pos = start
    while pos < end:
        field_start = pos
        tag, pos = _read_varint(buf, pos, end)
        number, wtype = tag >> 3, tag & 7
        if number == 0:
            raise ValueError("field number 0")
        if wtype == 0:
            _, value_end = _read_varint(buf, pos, end)
        elif wtype == 1:
            value_end = pos + 8
        elif wtype == 5:
            value_end = pos + 4
        elif wtype == _LEN:
            length, pos = _read_varint(buf, pos, end)
            value_end = pos + length
        else:
            raise ValueError(f"unsupported wire type {wtype}")
        if value_end > end:
            raise ValueError("field runs past the end of its message")
        yield number, wtype, pos, value_end, field_start
        pos = value_end


def split(data: bytes, fields: dict[int, SplitField]) -> tuple[bytes, dict[str, memoryview]]:
    """The message without the raw bytes of `fields`, and those bytes as views of `data`.

    For a field that occurs more than once the last bytes win, as a parser would merge.
    Raises ValueError for malformed framing.
    """
    if not fields:
        return data, {}
    buf = memoryview(data)
    raw: dict[str, memoryview] = {}
    pieces: list[Any] = []
    last = 0
    for number, wtype, start, end, field_start in iter_fields(buf, 0, len(buf)):
        split_field = fields.get(number)
        if split_field is None or wtype != _LEN:
            continue
        kept: list[Any] = []
        sub_last = start
        for inner, inner_type, s, e, f in iter_fields(buf, start, end):
            if inner == split_field.inner and inner_type == _LEN:
                raw[split_field.name] = buf[s:e]
                kept.append(buf[sub_last:f])
                sub_last = e
        if sub_last == start:
            continue  # nothing cut from this occurrence
        kept.append(buf[sub_last:end])
        body = b"".join(kept)
        pieces += [buf[last:field_start], varint(number << 3 | _LEN), varint(len(body)), body]
        last = end
    if not raw:
        return data, {}
    pieces.append(buf[last:])
    return b"".join(pieces), raw


def fragment(field: SplitField, payload: Any, head: bytes = b"") -> list[Any]:
    """The wire field `field { <head> inner: payload }` as chunks (payload not copied).

    `head` is the rest of the element message, serialised: with it the field is whole,
    one occurrence (see the module docstring).
    """
    size = memoryview(payload).nbytes
    inner_head = head + varint(field.inner << 3 | _LEN) + varint(size)
    return [varint(field.number << 3 | _LEN), varint(len(inner_head) + size), inner_head,
            payload]


def split_fields(message_cls: type, fields: list[tuple[str, Any]]) -> dict[int, SplitField]:
    """The fields of `message_cls` whose codecs take the raw-bytes path (singular only)."""
    out: dict[int, SplitField] = {}
    descriptor = message_cls.DESCRIPTOR  # type: ignore[attr-defined]
    for name, codec in fields:
        raw_name = codec.proto.raw_bytes_field
        if raw_name is None or codec.is_container:
            continue
        fd = descriptor.fields_by_name[name]
        inner = fd.message_type.fields_by_name[raw_name].number
        out[fd.number] = SplitField(name, fd.number, inner, codec)
    return out
