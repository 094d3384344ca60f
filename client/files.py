"""Files and images on the client.

Inputs of a file field (`type: file` over HTTP, `tensorwire.v1.File` over gRPC, and
`bytes` fields on both) may be a `pathlib.Path`, an open binary file, `bytes`, a PIL
image, or a `(filename, data[, media_type])` tuple; a `str` is sent as its UTF-8 text
(pass a `Path` to upload a file by its path). Over HTTP they travel as multipart file parts
(a root input: as the raw body), streamed from disk; over gRPC as a File message.

Outputs are saved as files under the client's directory (a private temporary directory
removed by `close()`, or the `files_dir` given to the client) and returned as `Path`s;
images are PIL images where the contract says so (`pil: true` over HTTP), or where the
caller asks for them with `output_types`. PIL is imported only when an image is used.
"""

from __future__ import annotations

import io
import mimetypes
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..errors import InvalidArgument
from . import jsonkinds, protokinds, values
from .jsonkinds import Body
from .response import Payload

OCTET = "application/octet-stream"


def is_pil_image(value: Any) -> bool:
    """Whether `value` is a PIL image, without importing PIL."""
    return any(c.__name__ == "Image" and (c.__module__ or "").startswith("PIL.")
               for c in type(value).__mro__)


def is_pil_type(tp: Any) -> bool:
    return isinstance(tp, type) and any(
        c.__name__ == "Image" and (c.__module__ or "").startswith("PIL.") for c in tp.__mro__)


def open_image(data: bytes) -> Any:
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def _guess(filename: str | None) -> str | None:
    return mimetypes.guess_type(filename)[0] if filename else None


def file_body(value: Any, declared: str | None = None) -> Body:
    """A file input as a Body (opening paths, encoding images), or InvalidArgument."""
    if isinstance(value, tuple) and 2 <= len(value) <= 3:
        filename, data, *media = value
        body = file_body(data, declared)
        body.filename = str(filename)
        body.media_type = media[0] if media else (_guess(str(filename)) or body.media_type)
        return body
    if is_pil_image(value):
        fmt = (value.format or "PNG").upper()
        out = io.BytesIO()
        value.save(out, format=fmt)
        from PIL import Image

        media = Image.MIME.get(fmt) or f"image/{fmt.lower()}"
        ext = mimetypes.guess_extension(media) or f".{fmt.lower()}"
        return Body(out.getvalue(), media, f"image{ext}")
    if isinstance(value, str):  # text content; a path must be a Path (unambiguous)
        return Body(value.encode("utf-8"), _concrete(declared) or "text/plain", "file.txt")
    if isinstance(value, os.PathLike):
        path = Path(value)
        if not path.is_file():
            raise FileNotFoundError(f"no such file to upload: {path}")
        media = _guess(path.name) or _concrete(declared) or OCTET
        return Body(open(path, "rb"), media, path.name, owned=True)
    if isinstance(value, bytes | bytearray | memoryview):
        return Body(bytes(value), _concrete(declared) or OCTET, "file")
    if hasattr(value, "read"):
        name = getattr(value, "name", None)
        filename = os.path.basename(name) if isinstance(name, str) else "file"
        return Body(value, _guess(filename) or _concrete(declared) or OCTET, filename)
    raise InvalidArgument(f"a file input takes a Path, an open binary file, bytes or a PIL "
                          f"image, not {type(value).__name__}")


def _concrete(media_type: str | None) -> str | None:
    """A declared media type usable as is (no wildcard, a single one)."""
    if not media_type or "*" in media_type or "," in media_type:
        return None
    return media_type


def read_body(body: Body) -> bytes:
    data = body.data
    try:
        return data if isinstance(data, bytes) else data.read()
    finally:
        body.close()


_UNSAFE = re.compile(r"[^0-9A-Za-z._-]+")


def safe_name(filename: str | None, media_type: str | None) -> str:
    """A plain file name from the server's (never a path), keeping its extension."""
    name = os.path.basename((filename or "").replace("\\", "/")).strip()
    name = _UNSAFE.sub("_", name).lstrip(".")
    if not name:
        ext = mimetypes.guess_extension(media_type or "") or ""
        name = f"output{ext}"
    return name[:200]


class ClientFiles:
    """Where a client writes file outputs: one fresh sub-directory per file."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self._given = Path(directory) if directory is not None else None
        self._dir: Path | None = None
        self._lock = threading.Lock()

    @property
    def directory(self) -> Path:
        with self._lock:
            if self._dir is None:
                if self._given is not None:
                    self._given.mkdir(parents=True, exist_ok=True)
                    self._dir = self._given
                else:
                    self._dir = Path(tempfile.mkdtemp(prefix="tensorwire-client-"))
            return self._dir

    def new_path(self, filename: str | None, media_type: str | None) -> Path:
        folder = Path(tempfile.mkdtemp(dir=self.directory, prefix="f"))
        return folder / safe_name(filename, media_type)

    def save_bytes(self, data: bytes, filename: str | None, media_type: str | None) -> Path:
        path = self.new_path(filename, media_type)
        path.write_bytes(data)
        return path

    async def save(self, payload: Payload) -> Path:
        path = self.new_path(payload.filename, payload.media_type)
        with open(path, "wb") as out:
            async for chunk in payload.chunks():
                out.write(chunk)
        return path

    def close(self) -> None:
        """Remove the private directory (a directory given by the caller is kept)."""
        with self._lock:
            if self._dir is not None and self._given is None:
                shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


# ---------------------------------------------------------------------- HTTP


class FileKind(jsonkinds.JsonKind):
    trivial = False
    is_file = True

    def __init__(self, schema: dict[str, Any]) -> None:
        super().__init__(schema)
        self.image = bool(schema.get("pil"))
        self.content_type = schema.get("content_type")

    def body(self, value: Any, files: Any) -> Body | None:
        return file_body(value, self.content_type)

    async def from_payload(self, payload: Payload, files: ClientFiles) -> Any:
        if payload.media_type == "application/json":  # an Optional file output: null
            data = await payload.read()
            return values.loads(data) if data else None
        if self.image:
            return open_image(await payload.read())
        return await files.save(payload)


jsonkinds.register_schema_kind(lambda s: s.get("type") == "file", FileKind)


# ---------------------------------------------------------------------- gRPC


class FileElement(protokinds.Message):
    """`tensorwire.v1.File {content, content_type, filename}` <-> a file on disk."""

    def fill(self, value: Any, msg: Any, loc: Any, files: Any) -> None:
        try:
            body = file_body(value)
        except InvalidArgument as exc:
            raise InvalidArgument.at(list(loc), exc.message, "file_type") from None
        msg.content = read_body(body)
        msg.content_type = body.media_type
        msg.filename = body.filename or ""

    def decode(self, raw: Any, files: ClientFiles) -> Any:
        return files.save_bytes(raw.content, raw.filename or None, raw.content_type or None)

    def summary(self) -> str:
        return "file"


protokinds.register_message_kind("tensorwire.v1.File", lambda desc: FileElement())
