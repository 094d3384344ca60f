"""Raw tensor bytes of `ModelInferRequest` / `ModelInferResponse` past the protobuf runtime.

Parsing a request the ordinary way copies each `raw_input_contents` entry twice (into
the parser's arena, then into a Python `bytes` on access); building a response copies
each output into the message and again when it is serialised. For big tensors those
copies are most of the work, so:

- reading: the top-level `raw_input_contents` fields (number 7) are cut out of the
  received bytes as views before the (now small) rest is parsed; the arrays made from
  them are views of the very buffer grpc handed over;
- writing: the response is serialised without its raw outputs, and each is appended as
  a `raw_output_contents` field (number 6) from its array's memory: one copy, the join.

Below `SPLIT_MIN` bytes the copies cost less than the framing walk, and the ordinary
path is taken. Only tags and lengths are read here, never a payload.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from ..protobuf.bytes_fields import iter_fields, varint

RAW_INPUT_CONTENTS: Final = 7
RAW_OUTPUT_CONTENTS: Final = 6
_LEN: Final = 2
#: Messages and payloads smaller than this take protobuf's own path.
SPLIT_MIN: Final = 64 * 1024


def split_raw_inputs(data: bytes, field: int = RAW_INPUT_CONTENTS
                     ) -> tuple[bytes, list[memoryview] | None]:
    """The request without its raw inputs, and those as views of `data` (in order).

    None instead of a list when the message is small (it is returned whole: read
    `raw_input_contents` from the parsed message) or has no raw inputs. Raises
    ValueError for malformed framing. A client reads a response's
    `raw_output_contents` the same way (`field=RAW_OUTPUT_CONTENTS`).
    """
    if len(data) < SPLIT_MIN:
        return data, None
    buf = memoryview(data)
    raws: list[memoryview] = []
    pieces: list[Any] = []
    last = 0
    for number, wtype, start, end, field_start in iter_fields(buf, 0, len(buf)):
        if number == field and wtype == _LEN:
            raws.append(buf[start:end])
            pieces.append(buf[last:field_start])
            last = end
    if not raws:
        return data, None
    pieces.append(buf[last:])
    return b"".join(pieces), raws


def join_raw_outputs(head: bytes, payloads: Sequence[Any], field: int = RAW_OUTPUT_CONTENTS
                     ) -> bytes:
    """A serialised message `head` followed by one length-delimited field `field` per
    payload (any bytes-like object, not copied before the final join)."""
    tag = varint(field << 3 | _LEN)
    pieces: list[Any] = [head]
    for payload in payloads:
        pieces += [tag, varint(memoryview(payload).nbytes), payload]
    return b"".join(pieces)


def length_delimited(field: int, payload: bytes) -> bytes:
    """One length-delimited field holding `payload` (a nested message's bytes)."""
    return b"".join((varint(field << 3 | _LEN), varint(len(payload)), payload))
