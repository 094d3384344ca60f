"""A strict reader of protobuf framing: no singular field may occur twice.

The protobuf spec lets a parser merge repeated occurrences of a singular message field,
and Python, Go, C++ and Java do; protobufjs (Node, browsers, grpc-web) keeps only the
last one. tensorwire's wire must read the same everywhere, so tests walk the encoded
bytes with the message's descriptor and report every singular field (or oneof) seen
more than once, at any depth.
"""

from __future__ import annotations

from typing import Any

from tensorwire.protobuf.bytes_fields import iter_fields

_LEN = 2


def repeated_singular_fields(descriptor: Any, data: bytes) -> list[str]:
    """Dotted paths of singular fields / oneofs that occur more than once in `data`.

    `data` is one serialised `descriptor` message; unknown field numbers are reported
    too (a field the descriptor does not know is a framing mistake here).
    """
    found: list[str] = []
    buf = memoryview(data)
    _walk(descriptor, buf, 0, len(buf), descriptor.full_name, found)
    return found


def _walk(descriptor: Any, buf: memoryview, start: int, end: int, path: str,
          found: list[str]) -> None:
    seen_fields: set[int] = set()
    seen_oneofs: dict[str, str] = {}
    for number, wtype, value_start, value_end, _ in iter_fields(buf, start, end):
        fd = descriptor.fields_by_number.get(number)
        if fd is None:
            found.append(f"{path}: unknown field number {number}")
            continue
        where = f"{path}.{fd.name}"
        if not fd.is_repeated:
            if number in seen_fields:
                found.append(where)
            seen_fields.add(number)
            oneof = fd.containing_oneof
            if oneof is not None and len(oneof.fields) > 1:  # not a proto3 `optional`
                other = seen_oneofs.setdefault(oneof.name, fd.name)
                if other != fd.name:
                    found.append(f"{path}.{oneof.name} ({other} and {fd.name})")
        if fd.message_type is not None and wtype == _LEN:
            _walk(fd.message_type, buf, value_start, value_end, where, found)
