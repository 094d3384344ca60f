"""Files and images on the client, as each wire carries them (see `filedata` for what a
file input may be and where outputs are saved).

Over HTTP a file is a multipart part or raw body (`type: file` in schema.json), and a
binary output (`type: string, format: binary`) is `bytes` or, when the response names a
file, a file saved under the client's directory; over gRPC a `tensorwire.v1.File`.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument
from . import jsonkinds, protokinds, values
from .filedata import Body, ClientFiles, file_body, open_image, read_body
from .response import Payload


class BytesKind(jsonkinds.JsonKind):
    """A binary output (`type: string, format: binary`): `bytes`, or a file.

    Files and images are binary strings in a serialised schema too; what tells them
    from `bytes` is the response itself: a file response names its file
    (`Content-Disposition` with a filename) and becomes a `Path` in the client's file
    directory (a PIL image where the contract says `pil: true`), exactly as the same
    output arrives over gRPC as a `tensorwire.v1.File`.
    """

    trivial = False

    async def from_payload(self, payload: Payload, files: Any) -> Any:
        if jsonkinds.is_json(payload.media_type):  # an Optional output that was null
            data = await payload.read()
            return jsonkinds.values.loads(data) if data else None
        if payload.filename is not None and files is not None:
            if self.schema.get("pil"):
                return open_image(await payload.read())
            return await files.save(payload)
        return await payload.read()


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

