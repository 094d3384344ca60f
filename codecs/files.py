"""`pathlib.Path`: a file, uploaded into the request's temp dir or sent back streamed.

Inputs (a multipart part, a raw root body, a `tensorwire.v1.File` over gRPC) are
written to a file with a generated name in `Context.temp_dir`; the client's file name is
metadata only (`ctx.state["uploads"][path]`), never part of a path. The media type is
read from the bytes (`media.resolve_media_type`) and checked against the field's
`ContentType` patterns: 415 over HTTP, INVALID_ARGUMENT over gRPC.

Outputs are file responses: the declared `ContentType` (else the extension, else the
bytes) as media type, `Content-Disposition` inline for images and attachment otherwise,
and the body streamed from disk in chunks, never read whole.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Annotated, Any, BinaryIO

from pydantic_core import core_schema as cs

from ..validators import ContentType
from .core import Codec, Scope
from .http_facet import HttpBody, HttpFacet, Part, UnsupportedBody
from .markers import CodecMarker, take_content_type
from .media import (
    OCTET_STREAM,
    SNIFF_BYTES,
    canonical,
    check_media,
    content_disposition,
    disposition_for,
    guess_from_name,
    resolve_media_type,
    safe_suffix,
    sniff,
    unsupported_to_field_error,
)
from .proto_facet import MessageProto
from .v2_facet import MediaV2

CHUNK = 256 * 1024


@dataclass(frozen=True)
class UploadInfo:
    """What the client said about an uploaded file (kept beside it, never trusted)."""

    filename: str | None
    #: The media type as resolved from the bytes (the client's claim refined by them).
    media_type: str
    claimed_media_type: str | None
    size: int


def _upload_name(directory: Path, suffix: str) -> Path:
    return directory / f"upload-{secrets.token_hex(8)}{suffix}"


def _final_suffix(filename: str | None, claimed: str | None, media_type: str) -> str:
    """The client's extension when it agrees with the content, else the content's own."""
    client = safe_suffix(filename, None if filename else claimed)
    if media_type == OCTET_STREAM or not client:
        return client or safe_suffix(None, media_type)
    if guess_from_name("x" + client) in (media_type, ""):
        return client
    return safe_suffix(None, media_type) or client


def _remember(scope: Scope, path: Path, info: UploadInfo) -> None:
    scope.state.setdefault("uploads", {})[path] = info


def _read_head(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read(SNIFF_BYTES)


class PathMarker(CodecMarker):
    """Annotated metadata of a Path field: the pydantic schema and the codec."""

    def __init__(self, codec: FileCodec) -> None:
        self.codec = codec

    def __repr__(self) -> str:
        return f"PathMarker({self.codec.content_type})"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        def from_json(value: Any) -> Any:
            raise ValueError("a file cannot be sent inside JSON: send it as a "
                             "multipart/form-data part (or a tensorwire.v1.File over gRPC)")

        return cs.json_or_python_schema(
            json_schema=cs.no_info_plain_validator_function(from_json),
            python_schema=cs.no_info_after_validator_function(
                Path, cs.is_instance_schema(PurePath)),
            serialization=cs.plain_serializer_function_ser_schema(
                lambda v: PurePath(v).name, when_used="json"),
        )

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        return self.codec.json_schema(handler.mode)


class FileProto(MessageProto):
    """A `tensorwire.v1.File`: content, content type and file name."""

    codec: FileCodec

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return self.codec.store_bytes(bytes(raw.content), raw.content_type or None,
                                      raw.filename or None, scope)

    def fill(self, value: Any, msg: Any) -> None:
        path = Path(value)
        msg.content = path.read_bytes()
        msg.content_type = self.codec.media_type_of(path)
        msg.filename = path.name


class FileHttp(HttpFacet):
    """A multipart part or raw body spooled to disk; a streamed file response out."""

    codec: FileCodec
    json_answer = False  # the file's bytes, streamed
    json_chunks = False  # a path's JSON, not the file's

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        return await self.store(body, scope)

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        return await self.store(part, scope)

    async def store(self, part: Part, scope: Scope) -> Path:
        """Spool a part to disk, then check what it is (its bytes, not its label)."""
        directory = scope.temp_dir
        tmp = _upload_name(directory, ".part")
        try:
            size = await part.save(tmp)
            media_type = resolve_media_type(_read_head(tmp), part.media_type, part.filename)
            check_media(self.codec.content_type, media_type, part.media_type)
            path = _upload_name(directory,
                                _final_suffix(part.filename, part.media_type, media_type))
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _remember(scope, path, UploadInfo(part.filename, media_type, part.media_type, size))
        return path

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        path = Path(value)
        return file_response(path, self.codec.media_type_of(path))

    def encode_chunk(self, value: Any) -> bytes:
        return self.codec.adapter.dump_json(value)


class FileV2(MediaV2):
    """One BYTES element per file, its media type in the tensor's `content_type`
    parameter (the client's claim in, the file's type out); stored like a gRPC File."""

    codec: FileCodec

    def from_element(self, item: Any, parameters: Any, scope: Scope) -> Any:
        return self.codec.store_bytes(self.content(item), self.claimed(parameters), None,
                                      scope)

    def media_element(self, value: Any) -> tuple[bytes, str | None]:
        path = Path(value)
        return path.read_bytes(), self.codec.media_type_of(path)


class FileCodec(Codec):
    """`pathlib.Path` (and `Annotated[Path, ContentType(...)]`): a file on every wire."""

    def __init__(self, python_type: Any, content_type: ContentType | None,
                 extra: tuple[Any, ...] = ()) -> None:
        super().__init__(python_type, Annotated[(Path, PathMarker(self), *extra)])
        self.content_type = content_type
        pattern = content_type.pattern if content_type else None
        #: One concrete declared type (no wildcard, no list): used as is for outputs.
        self.declared = canonical(pattern) if pattern and not any(
            c in pattern for c in "*?[,") else None
        self.http = FileHttp(self, body_media=pattern or OCTET_STREAM,
                             output_media=self.declared or OCTET_STREAM, is_file=True)
        self.proto = FileProto(self, "tensorwire.v1.File")
        self.v2 = FileV2(self, pattern or OCTET_STREAM)

    def __repr__(self) -> str:
        return f"FileCodec({self.content_type})"

    def store_bytes(self, content: bytes, claimed: str | None, filename: str | None,
                    scope: Scope) -> Path:
        """An upload received whole (gRPC File, OIP BYTES): checked for its media type
        (its bytes, refined by the claim), then written to a generated name in the
        request's temp dir; FieldError (type `content_type`) on a mismatch."""
        media_type = resolve_media_type(content[:SNIFF_BYTES], claimed, filename)
        try:
            check_media(self.content_type, media_type, claimed)
        except UnsupportedBody as exc:
            raise unsupported_to_field_error(exc) from None
        path = _upload_name(scope.temp_dir, _final_suffix(filename, claimed, media_type))
        path.write_bytes(content)
        _remember(scope, path, UploadInfo(filename, media_type, claimed, len(content)))
        return path

    def json_schema(self, mode: str) -> dict[str, Any]:
        """schema.json form (BentoML's): `type: file`; serialised, a binary string."""
        if mode == "serialization":
            return {"type": "string", "format": "binary"}
        out: dict[str, Any] = {"type": "file", "format": "binary"}
        if self.content_type is not None:
            out["format"] = self.content_type.pattern.split("/", 1)[0].strip() or "binary"
            out["content_type"] = self.content_type.pattern
        return out

    def media_type_of(self, path: Path) -> str:
        """An output file's media type: declared, else by extension, else by content."""
        if self.declared:
            return self.declared
        by_name = guess_from_name(path.name)
        if by_name:
            return by_name
        try:
            return sniff(_read_head(path)) or OCTET_STREAM
        except OSError:
            return OCTET_STREAM


def file_response(path: Path, media_type: str, filename: str | None = None) -> HttpBody:
    """A streamed HTTP body of a file on disk (opened now, read chunk by chunk later).

    Opening before returning means a file that is gone is a 500 raised here, not a
    truncated 200, and that the open descriptor keeps the data readable even if the
    request's temp dir is removed while the response is still being written.
    """
    f = open(path, "rb")  # noqa: SIM115 - closed by the chunk iterator
    try:
        size = os.fstat(f.fileno()).st_size
    except BaseException:
        f.close()
        raise
    name = filename or path.name
    headers = {"Content-Disposition": content_disposition(disposition_for(media_type), name)}
    return HttpBody(_chunks(f), media_type, headers=headers, length=size)


async def _chunks(f: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while True:
            chunk = await asyncio.to_thread(f.read, CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        f.close()


def build(base: Any, metadata: tuple[Any, ...], annotation: Any) -> Codec:
    """The registry's builder for the Path family."""
    content_type, extra = take_content_type(metadata, "Path")
    return FileCodec(base, content_type, extra)
