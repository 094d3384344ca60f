"""Request bodies as the server holds them: plain, or inflated from `Content-Encoding`.

`gzip` (`x-gzip`) and `deflate` request bodies are accepted (tritonclient and other
inference clients send them). aiohttp's own inflation (`auto_decompress`) is turned off
by `tensorwire.http.connections.runner`: it runs inside the protocol's
`data_received`, before any handler can count a byte, and one 64 KiB read of a gzip
bomb grew a worker by about 64 MiB before the 413 came (ten at once: +268 MiB). Here a
body is inflated in steps of at most `STEP` bytes, each counted against the size limit
before the next step is made, so an inflated body never holds more than the limit (plus
one step), compressed or not; the compressed bytes count against the limit as well.

Large answers go the other way through `write_view`: in steps of `WRITE_STEP` bytes,
each awaited until the transport has passed it on, so the transport never holds a
payload-sized copy of its own (asyncio's transport copies whatever the socket does not
take at once into its buffer).

Other codings (`br`, `zstd`, stacked codings) are 415 with `Accept-Encoding` naming the
ones accepted (RFC 9110 §15.5.16). A compressed `multipart/form-data` body is 415 too:
its parts are parsed as they stream, by a reader that cannot inflate (compress the
files themselves, or send the body plain). Corrupt or truncated compressed data is 400.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

from aiohttp import web

from ..errors import InvalidArgument, PayloadTooLarge, UnsupportedMediaType

#: Most bytes one inflation step produces (and so the most a step can overshoot).
STEP = 64 * 1024
#: The most bytes of an answer handed to the transport at once (see `write_view`).
WRITE_STEP = 1 << 20
#: Compressed bytes read from the socket at a time.
READ = 64 * 1024
#: The codings accepted, as `Accept-Encoding` lists them.
ACCEPTED = "gzip, deflate"
_GZIP = 16 + zlib.MAX_WBITS
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_CODINGS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


def content_coding(request: web.BaseRequest) -> str | None:
    """The request's content coding (`gzip` or `deflate`); None for a plain body.

    UnsupportedMediaType (415) for a coding that is not inflated here.
    """
    header = request.headers.get("Content-Encoding")
    if header is None:
        return None
    codings = [c.strip().lower() for c in header.split(",")]
    codings = [c for c in codings if c and c != "identity"]
    if not codings:
        return None
    if len(codings) > 1 or codings[0] not in _CODINGS:
        raise UnsupportedMediaType(
            f"unsupported Content-Encoding {header.strip()!r}; this server inflates one "
            f"of: {ACCEPTED}", headers={"Accept-Encoding": ACCEPTED})
    return _CODINGS[codings[0]]


class Inflater:
    """Inflates one compressed body in bounded steps, counting them against `limit`."""

    def __init__(self, coding: str, limit: int) -> None:
        self.coding = coding
        self.limit = limit
        #: Compressed bytes taken in, inflated bytes given out.
        self.taken = 0
        self.given = 0
        self._d: zlib._Decompress | None = None

    def _decompressor(self, first: bytes) -> zlib._Decompress:
        if self.coding == "gzip":
            return zlib.decompressobj(_GZIP)
        # RFC 9110's deflate is the zlib format; some clients send raw deflate. A zlib
        # stream's first byte names method 8 in its low bits (aiohttp tells them the
        # same way).
        return zlib.decompressobj(_ZLIB if first[0] & 0x0F == 8 else _RAW)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The inflated pieces of `data` (each at most STEP bytes), as they are made."""
        self.taken += len(data)
        if self.taken > self.limit:
            raise self._too_large("compressed request body")
        while data:
            d = self._d
            if d is None or d.eof:
                if d is not None and self.coding != "gzip":
                    raise InvalidArgument(f"data after the end of the {self.coding} stream")
                d = self._d = self._decompressor(data)  # gzip allows several members
            while True:
                try:
                    piece = d.decompress(data, STEP)
                except zlib.error as exc:
                    raise InvalidArgument(
                        f"the request body is not valid {self.coding} data: {exc}") from None
                self.given += len(piece)
                if self.given > self.limit:
                    raise self._too_large("request body, inflated,")
                if piece:
                    yield piece
                data = d.unconsumed_tail
                # A full step may leave output inside zlib with no input left: drain it.
                if d.eof or not (data or len(piece) == STEP):
                    break
            data = d.unused_data if d.eof else b""

    def finish(self) -> None:
        """Refuse a stream that ended before its compressed data did."""
        if self._d is not None and not self._d.eof:
            raise InvalidArgument(f"the request body is truncated {self.coding} data")

    def _too_large(self, what: str) -> PayloadTooLarge:
        return PayloadTooLarge(f"{what} exceeds the limit of {self.limit} bytes")


async def body_chunks(request: web.BaseRequest, limit: int) -> AsyncIterator[bytes]:
    """The request body in chunks, inflated when it is compressed; 413 past `limit`."""
    coding = content_coding(request)
    if coding is None:
        seen = 0
        async for chunk in request.content.iter_chunked(READ):
            seen += len(chunk)
            if seen > limit:
                raise PayloadTooLarge(f"request body exceeds the limit of {limit} bytes")
            yield chunk
        return
    inflater = Inflater(coding, limit)
    async for chunk in request.content.iter_chunked(READ):
        for piece in inflater.feed(chunk):
            yield piece
    inflater.finish()


async def read_body(request: web.BaseRequest, limit: int) -> bytes:
    """The whole request body, inflated when it is compressed; 413 past `limit`."""
    if content_coding(request) is None:
        try:
            return await request.read()  # aiohttp's client_max_size is the same limit
        except web.HTTPRequestEntityTooLarge:
            raise PayloadTooLarge(
                f"request body exceeds the limit of {limit} bytes") from None
    body = bytearray()
    async for piece in body_chunks(request, limit):
        body += piece
    return bytes(body)


async def write_view(resp: web.StreamResponse, data: bytes | bytearray | memoryview
                     ) -> None:
    """Write `data` (an array's memory, say) to a prepared response in steps of at most
    `WRITE_STEP` bytes, each drained before the next: whatever the socket does not take
    at once is copied by asyncio's transport into its own buffer, so a payload handed
    over whole would be a second payload-sized buffer there."""
    view = memoryview(data)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    size = view.nbytes
    if size <= WRITE_STEP:
        await resp.write(view)
        return
    for start in range(0, size, WRITE_STEP):
        await resp.write(view[start:start + WRITE_STEP])
