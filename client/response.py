"""A received binary payload (an HTTP response body or one multipart part), read once.

Kinds that decode binary outputs (tensors, files, images) read it through this small
interface, so the same code serves whole responses and parts of a multipart response.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

from aiohttp.multipart import content_disposition_filename, parse_content_disposition

CHUNK = 256 * 1024


class Payload(Protocol):
    media_type: str | None
    #: The sender's file name (Content-Disposition), metadata only.
    filename: str | None
    headers: Mapping[str, str]

    async def read(self) -> bytes: ...

    def chunks(self) -> AsyncIterator[bytes]: ...


def media_type_of(content_type: str | None) -> str | None:
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def charset_of(content_type: str | None, default: str = "utf-8") -> str:
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip('"')
    return default


def filename_of(disposition: str | None) -> str | None:
    if not disposition:
        return None
    _, params = parse_content_disposition(disposition)
    return content_disposition_filename(params, "filename")


class ResponsePayload:
    """An aiohttp response body as a Payload."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self.headers = response.headers
        self.media_type = media_type_of(response.headers.get("Content-Type"))
        self.filename = filename_of(response.headers.get("Content-Disposition"))

    async def read(self) -> bytes:
        return await self._response.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.content.iter_chunked(CHUNK):
            yield chunk


class PartPayload:
    """One part of a multipart response (aiohttp's BodyPartReader) as a Payload."""

    def __init__(self, part: Any) -> None:
        self._part = part
        self.headers = part.headers
        self.media_type = media_type_of(part.headers.get("Content-Type"))
        self.filename = part.filename

    async def read(self) -> bytes:
        return bytes(await self._part.read(decode=True))

    async def chunks(self) -> AsyncIterator[bytes]:
        while chunk := await self._part.read_chunk(CHUNK):
            yield chunk


class BytesPayload:
    """Bytes already in memory (gRPC File content, tests) as a Payload."""

    def __init__(self, data: bytes, media_type: str | None = None,
                 filename: str | None = None) -> None:
        self._data = data
        self.media_type = media_type
        self.filename = filename
        self.headers: Mapping[str, str] = {}

    async def read(self) -> bytes:
        return self._data

    async def chunks(self) -> AsyncIterator[bytes]:
        yield self._data
