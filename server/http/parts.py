"""Request bodies and multipart parts as the `Part`s codecs read (read at most once).

Besides `read` (everything, within the limits) and `save` (to a file), a part can be
read as it arrives (`read_exactly` for a header, `read_into` for an array's bytes): a
tensor codec then reads the socket's chunks straight into the one array the body
becomes, with no chunks gathered and no join (`tensorwire.wire.npy.read_from`). Each
chunk aiohttp's parser hands over is copied once, into place, and dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.multipart import content_disposition_filename, parse_content_disposition

from ..errors import InvalidArgument, PayloadTooLarge
from .aiohttp_compat import ProtocolBase
from .body import body_chunks, content_coding, read_body

CHUNK = 256 * 1024


def media_type_of(content_type: str | None) -> str | None:
    """`Content-Type` header -> lowercase media type without parameters (None if absent)."""
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


class BodyPart:
    """The whole request body of a root input, as one Part.

    `length` is the body's Content-Length when its bytes are what the codec reads (no
    Content-Encoding, not chunked): then it can be read as it arrives, else only whole
    (`read`: a compressed body is inflated in bounded steps, a chunked one gathered
    within the limit).
    """

    def __init__(self, request: web.Request, name: str, limit: int) -> None:
        self._request = request
        self.name = name
        self.media_type = media_type_of(request.headers.get("Content-Type"))
        self.filename = _filename(request.headers.get("Content-Disposition"))
        self.limit = limit
        self.consumed = 0
        length = request.content_length
        plain = length is not None and length <= limit and content_coding(request) is None
        self.length: int | None = length if plain else None
        #: A plain body holds exactly `length` bytes; nothing else is read as it arrives.
        self.bound: int | None = self.length
        protocol = request.protocol
        self._stream = _Stream(request.content, self.length,
                               protocol if isinstance(protocol, ProtocolBase) else None)

    async def read(self) -> bytes:
        if self.consumed:  # the rest of a body read in part already (plain: no coding)
            data = await self._stream.rest()
        else:
            data = await read_body(self._request, self.limit)  # inflated if compressed
        self.consumed += len(data)
        return data

    async def read_exactly(self, n: int) -> bytes:
        data = await self._stream.read_exactly(n)
        self.consumed += len(data)
        return data

    async def read_into(self, view: memoryview) -> int:
        got = await self._stream.read_into(view)
        self.consumed += got
        return got

    async def save(self, path: Path) -> int:
        with open(path, "wb") as out:
            async for chunk in body_chunks(self._request, self.limit):
                self.consumed += len(chunk)
                out.write(chunk)
        return self.consumed


class _Chunks:
    """Bytes that arrive in chunks, read in the sizes a decoder asks for: what a read
    did not need is kept for the next one (`_left`). A subclass says where the next
    fresh chunk comes from (`_fresh`)."""

    _left = b""

    async def _fresh(self) -> bytes:
        raise NotImplementedError

    async def _next(self) -> bytes:
        """The next chunk (b"" at the end): what was left over first."""
        if self._left:
            data, self._left = self._left, b""
            return data
        return await self._fresh()

    async def read_exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n and (data := await self._next()):
            need = n - len(out)
            if len(data) > need:
                data, self._left = data[:need], data[need:]
            out += data
        return out

    async def _fill(self, view: memoryview, pos: int = 0) -> int:
        """Copy chunks into `view` from `pos` until it is full or the bytes end."""
        end = view.nbytes
        while pos < end and (data := await self._next()):
            size = min(len(data), end - pos)
            if size < len(data):
                self._left = data[size:]
            view[pos:pos + size] = memoryview(data)[:size]
            pos += size
        return pos


class _Stream(_Chunks):
    """A plain body's bytes from aiohttp's StreamReader, one received chunk at a time
    (`readchunk` hands each over whole: no join). A read of the whole rest of a body of
    `length` bytes goes straight from the socket into its buffer where the
    connection's protocol can lend it (`ProtocolBase.read_into`)."""

    #: Below this a body's rest is copied in chunk by chunk (lending the socket costs
    #: a parser and two protocol swaps: worth it for megabytes, not for kilobytes).
    LEND_FROM = 1 << 20

    def __init__(self, content: Any, length: int | None = None,
                 protocol: ProtocolBase | None = None) -> None:
        self._content = content
        self._length = length
        self._protocol = protocol

    async def _fresh(self) -> bytes:
        data, _ = await self._content.readchunk()
        return data

    async def read_into(self, view: memoryview) -> int:
        pos, end = 0, view.nbytes
        if self._left:
            size = min(len(self._left), end)
            view[:size] = memoryview(self._left)[:size]
            self._left = self._left[size:]
            pos = size
        if (self._protocol is not None and self._length is not None
                and end - pos >= self.LEND_FROM):
            return pos + await self._protocol.read_into(self._content, view[pos:],
                                                        self._length)
        return await self._fill(view, pos)

    async def rest(self) -> bytes:
        parts = []
        while data := await self._next():
            parts.append(data)
        return b"".join(parts)


class MultipartPart(_Chunks):
    """One part of a multipart/form-data request, streamed from aiohttp's reader.

    Two budgets apply while it streams: `part_limit` (any one part) and `limit` (what
    is left of the whole request's); past either the request is 413, mid-stream. Its
    length is unknown until its boundary comes; `bound` is the most it can hold (the
    budgets and the request's Content-Length), None for a chunked request.
    """

    length: int | None = None

    def __init__(self, reader: BodyPartReader, limit: int, part_limit: int | None = None,
                 request_length: int | None = None) -> None:
        self._reader = reader
        self.name = reader.name or ""
        self.filename = reader.filename
        self.media_type = media_type_of(reader.headers.get("Content-Type"))
        self.limit = limit
        self.part_limit = limit if part_limit is None else part_limit
        self.consumed = 0
        self.bound: int | None = (None if request_length is None else
                                  min(self.part_limit, self.limit, request_length))

    async def _fresh(self) -> bytes:
        """The next chunk, counted against the budgets (b"" at the part's end)."""
        chunk = await self._reader.read_chunk(CHUNK)
        if chunk:
            self.consumed += len(chunk)
            if self.consumed > self.part_limit:
                raise PayloadTooLarge(f"part {self.name!r} is too large: a part may carry at "
                                      f"most {self.part_limit} bytes")
            if self.consumed > self.limit:
                raise PayloadTooLarge(f"part {self.name!r} is too large: the request "
                                      f"may carry at most {self.limit} more bytes")
        return chunk

    async def _chunks(self):
        while chunk := await self._next():
            yield chunk

    async def read(self) -> bytes:
        data = bytearray()
        async for chunk in self._chunks():
            data += chunk
        return bytes(data)

    async def read_into(self, view: memoryview) -> int:
        return await self._fill(view)

    async def save(self, path: Path) -> int:
        with open(path, "wb") as out:
            async for chunk in self._chunks():
                out.write(chunk)
        return self.consumed


def malformed_multipart(exc: Exception) -> InvalidArgument:
    """400 for what aiohttp's multipart reader refuses (its own exceptions are not
    errors of ours and would escape as a 500).

    An over-long part header line (past aiohttp's 8190 bytes) is named without echoing
    it: the message quotes no client bytes.
    """
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the limit of"
        why = f"a part header line is longer than {limit} bytes"
    elif isinstance(exc, HttpProcessingError):
        why = exc.message
    else:
        why = str(exc)
    return InvalidArgument(f"malformed multipart body: {why}")


def _filename(disposition: str | None) -> str | None:
    if not disposition:
        return None
    _, params = parse_content_disposition(disposition)
    return content_disposition_filename(params, "filename")
