"""HTTP inference bodies read as they arrive: Triton's binary extension straight into
one buffer.

`parse_http_infer_request` (`binary`) parses a body already in memory. A body whose
length is known (its Content-Length) is read here instead: the JSON header first, its
sizes checked against the body's length, then every binary input's bytes into one
buffer the caller provides, which the inputs' arrays are views of. A 64 MiB tensor is
then one buffer from the socket to the model (aiohttp's chunks copied into place, none
gathered or joined), where reading the body whole held it two or three times over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from .binary import (
    HttpInferRequest,
    RawInput,
    parse_header_length,
    parse_http_infer_request,
    parse_json_header,
    raw_request,
    raw_shape,
    raw_spec,
    with_binary,
)
from .datatypes import BYTES, OIPError, datatype
from .raw import byte_view


async def read_http_infer_request(source: Source, header_length: str | int | None, *,
                                  take: Callable[[int], memoryview],
                                  raw_input: RawInput | None = None) -> HttpInferRequest:
    """`parse_http_infer_request` of a body read as it arrives, whose length is known
    (`source.length`, its Content-Length): the JSON header first, then every binary
    input's bytes straight into one buffer (`take(nbytes)`: the transport's, a reused
    one from its pool, say) that the inputs' arrays are views of: no chunks gathered,
    no join.

    Every size is checked against the body's length before the buffer is allocated
    (each input's `binary_data_size` against its shape, their sum against what follows
    the header; a raw body's length against the input's shape), with the refusals and
    messages of `parse_http_infer_request`. A JSON body, and a raw BYTES body, are read
    whole (they are parsed, not viewed).
    """
    total = source.length
    assert total is not None, "read_http_infer_request needs a body of known length"
    length = parse_header_length(header_length, total)
    if length is None:
        return parse_http_infer_request(await source.read(), None, raw_input=raw_input)
    if length == 0:
        spec = raw_spec(raw_input)
        if datatype(spec.datatype, spec.name) is BYTES:
            return raw_request(byte_view(await source.read()), spec)
        raw_shape(total, spec)  # refused before anything is allocated
        region = await _read_region(source, total, take)
        return raw_request(region, spec)
    request = parse_json_header(await source.read_exactly(length))
    with_binary(request, None, total - length)  # sizes checked before allocating
    region = await _read_region(source, total - length, take)
    return with_binary(request, region, total - length)


class Source(Protocol):
    """A body read as it arrives (the HTTP transport's `BodyPart`)."""

    length: int | None

    async def read(self) -> bytes: ...

    async def read_exactly(self, n: int) -> bytes: ...

    async def read_into(self, view: memoryview) -> int: ...


async def _read_region(source: Source, size: int, take: Callable[[int], memoryview]
                       ) -> memoryview:
    """The next `size` bytes of `source`, read into one buffer."""
    region = take(size)
    if size:
        got = await source.read_into(region)
        if got != size:  # the client stopped short of its Content-Length
            raise OIPError.body(f"the request body ended {size - got} bytes short of "
                                "its Content-Length")
    return region
