"""`multipart/form-data` response bodies: several files (or files beside JSON) in one.

One part per output field, named after it (a list of files: one part per item, all of
that name), each with its own Content-Type and, for files, a file name. Parts that are
streams (files on disk) stay streams: the body is written chunk by chunk, never joined
in memory.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable
from typing import Any

from .http_facet import JSON, HttpBody

_CRLF = b"\r\n"


def _quote(value: str) -> str:
    # RFC 7578 §4.2: a name is a quoted string; escape what would end it.
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace(
        "\n", "%0A")


def _filename_param(disposition: str | None) -> str:
    """The `filename=...` parameters of a part's own Content-Disposition, if any."""
    if not disposition:
        return ""
    _, _, params = disposition.partition(";")
    return "; " + params.strip() if params.strip() else ""


def encode_parts(parts: Iterable[tuple[str, HttpBody]]) -> HttpBody:
    """A multipart/form-data body of (field name, encoded value) parts."""
    boundary = "tensorwire-" + secrets.token_hex(12)
    items: list[tuple[bytes, HttpBody]] = []
    length: int | None = 0
    for name, body in parts:
        headers = [f'Content-Disposition: form-data; name="{_quote(name)}"'
                   f"{_filename_param(body.headers.get('Content-Disposition'))}",
                   f"Content-Type: {body.media_type}"]
        if isinstance(body.content, bytes | bytearray | memoryview):
            headers.append(f"Content-Length: {len(body.content)}")
        elif body.length is not None:
            headers.append(f"Content-Length: {body.length}")
        head = (f"--{boundary}\r\n" + "\r\n".join(headers) + "\r\n\r\n").encode()
        items.append((head, body))
        size = _size(body)
        length = None if length is None or size is None else length + len(head) + size + 2
    tail = f"--{boundary}--\r\n".encode()
    if length is not None:
        length += len(tail)
    return HttpBody(_stream(items, tail), f"multipart/form-data; boundary={boundary}",
                    length=length)


def _size(body: HttpBody) -> int | None:
    if isinstance(body.content, bytes | bytearray | memoryview):
        return len(body.content)
    return body.length


async def _stream(items: list[tuple[bytes, HttpBody]], tail: bytes) -> AsyncIterator[bytes]:
    try:
        for head, body in items:
            yield head
            if isinstance(body.content, bytes | bytearray | memoryview):
                yield bytes(body.content)
            else:
                async for chunk in body.content:
                    yield chunk
            yield _CRLF
        yield tail
    finally:
        for _, body in items:  # close file streams a failed write did not reach
            close = getattr(body.content, "aclose", None)
            if close is not None:
                await close()


def field_parts(name: str, codec: Any, value: Any, accept: str | None
                ) -> list[tuple[str, HttpBody]]:
    """The parts of one output field: files and tensors as themselves, the rest as JSON."""
    if value is None:
        return []
    http = codec.http
    item = http.item
    if http.repeated_parts and item is not None:
        return [(name, item.encode(v, accept)) for v in value]
    if http.is_file or codec.has_tensors:
        return [(name, http.encode(value, accept))]
    return [(name, HttpBody(codec.dump_json(value), JSON))]
