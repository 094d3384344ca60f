"""Request bodies and multipart parts as the `Part`s codecs read (read at most once)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.multipart import content_disposition_filename, parse_content_disposition

from ..errors import InvalidArgument, PayloadTooLarge
from .body import body_chunks, read_body

CHUNK = 256 * 1024


def media_type_of(content_type: str | None) -> str | None:
    """`Content-Type` header -> lowercase media type without parameters (None if absent)."""
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


class BodyPart:
    """The whole request body of a root input, as one Part."""

    def __init__(self, request: web.Request, name: str, limit: int) -> None:
        self._request = request
        self.name = name
        self.media_type = media_type_of(request.headers.get("Content-Type"))
        self.filename = _filename(request.headers.get("Content-Disposition"))
        self.limit = limit
        self.consumed = 0

    async def read(self) -> bytes:
        data = await read_body(self._request, self.limit)  # inflated if compressed
        self.consumed = len(data)
        return data

    async def save(self, path: Path) -> int:
        with open(path, "wb") as out:
            async for chunk in body_chunks(self._request, self.limit):
                self.consumed += len(chunk)
                out.write(chunk)
        return self.consumed


class MultipartPart:
    """One part of a multipart/form-data request, streamed from aiohttp's reader.

    Two budgets apply while it streams: `part_limit` (any one part) and `limit` (what
    is left of the whole request's); past either the request is 413, mid-stream.
    """

    def __init__(self, reader: BodyPartReader, limit: int, part_limit: int | None = None
                 ) -> None:
        self._reader = reader
        self.name = reader.name or ""
        self.filename = reader.filename
        self.media_type = media_type_of(reader.headers.get("Content-Type"))
        self.limit = limit
        self.part_limit = limit if part_limit is None else part_limit
        self.consumed = 0

    async def _chunks(self):
        while chunk := await self._reader.read_chunk(CHUNK):
            self.consumed += len(chunk)
            if self.consumed > self.part_limit:
                raise PayloadTooLarge(f"part {self.name!r} is too large: a part may carry at "
                                      f"most {self.part_limit} bytes")
            if self.consumed > self.limit:
                raise PayloadTooLarge(f"part {self.name!r} is too large: the request "
                                      f"may carry at most {self.limit} more bytes")
            yield chunk

    async def read(self) -> bytes:
        data = bytearray()
        async for chunk in self._chunks():
            data += chunk
        return bytes(data)

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
