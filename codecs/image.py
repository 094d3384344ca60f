"""`PIL.Image.Image`: an image in any format PIL reads, out in its own format.

In: a raw body, a multipart part or a `tensorwire.v1.File`, read into memory (within the
request's part and size limits) and decoded by PIL. Out: saved in the image's own
format (`image.format`), PNG when it has none or PIL cannot write it in that mode.

Decoding is guarded: the header is read first and an image of more pixels than the
limit is refused before any pixel is decoded (a decompression bomb); truncated,
corrupt or non-image bytes are a clear 400 / INVALID_ARGUMENT.

The pixel limit: `Settings.extra["max_image_pixels"]`, else `$TENSORWIRE_MAX_IMAGE_PIXELS`,
else PIL's own `Image.MAX_IMAGE_PIXELS` (89,478,485 pixels: about 0.25 GiB as 24-bit
RGB). PIL also refuses, on its own, anything past twice its `Image.MAX_IMAGE_PIXELS`; a
limit set above that needs PIL's raised too.

PIL is imported the first time a service declares an Image, never by `import tensorwire`.
"""

from __future__ import annotations

import io
import mimetypes
import os
import warnings
from typing import Annotated, Any

from PIL import Image, UnidentifiedImageError
from pydantic_core import core_schema as cs

from ..validators import ContentType
from ..wire.field_error import FieldError
from .core import Codec, Scope
from .http_facet import HttpBody, HttpFacet, Part, UnsupportedBody
from .markers import CodecMarker, take_content_type
from .media import (
    SNIFF_BYTES,
    accepts,
    canonical,
    check_media,
    content_disposition,
    resolve_media_type,
    sniff,
    unsupported_to_field_error,
)
from .proto_facet import MessageProto
from .v2_facet import MediaV2

ENV_MAX_PIXELS = "TENSORWIRE_MAX_IMAGE_PIXELS"
DEFAULT_OUTPUT_FORMAT = "PNG"


def max_pixels(scope: Scope) -> int | None:
    """The pixel limit of one decode (None: no limit beyond PIL's own)."""
    value = scope.limits.get("max_image_pixels")
    if value is None:
        value = os.environ.get(ENV_MAX_PIXELS)
    if value is None:
        return Image.MAX_IMAGE_PIXELS
    value = int(value)
    return value if value > 0 else None


def decode_image(data: bytes, limit: int | None) -> Any:
    """PIL image from bytes, fully loaded; FieldError for anything that is not one."""
    if not data:
        raise FieldError("the image is empty", type="image")
    try:
        # PIL warns (DecompressionBombWarning) past its own MAX_IMAGE_PIXELS on every such
        # image; the limit is enforced here and by PIL's error, so that warning would only
        # repeat in the server log once per request. Errors are unchanged.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if limit is not None and width * height > limit:
                raise FieldError(f"the image is {width}x{height} = {width * height} pixels, "
                                 f"over the limit of {limit} (a decompression bomb?)",
                                 type="image")
            image.load()
    except FieldError:
        raise
    except Image.DecompressionBombError as exc:
        raise FieldError(f"the image is too large to decode (a decompression bomb?): {exc}",
                         type="image") from None
    except UnidentifiedImageError:
        raise FieldError("the content is not an image PIL can read", type="image") from None
    except (OSError, SyntaxError, ValueError, EOFError, IndexError, TypeError) as exc:
        # OSError covers "image file is truncated"; the others come from broken headers.
        raise FieldError(f"the image cannot be decoded: {exc}", type="image") from None
    except MemoryError:
        raise FieldError("the image is too large to decode", type="image") from None
    return image


def encode_image(image: Any, format: str | None = None) -> tuple[bytes, str]:
    """(bytes, media type) of an image, in its own format, else PNG."""
    fmt = (format or getattr(image, "format", None) or DEFAULT_OUTPUT_FORMAT).upper()
    buf = io.BytesIO()
    try:
        image.save(buf, format=fmt)
    except (OSError, KeyError, ValueError):
        # A format PIL reads but cannot write, or a mode it cannot hold (RGBA as JPEG).
        fmt = DEFAULT_OUTPUT_FORMAT
        buf = io.BytesIO()
        image.save(buf, format=fmt)
    Image.init()
    media_type = Image.MIME.get(fmt) or f"image/{fmt.lower()}"
    return buf.getvalue(), media_type


class ImageMarker(CodecMarker):
    """Annotated metadata of an Image field: the pydantic schema and the codec."""

    def __init__(self, codec: ImageCodec) -> None:
        self.codec = codec

    def __repr__(self) -> str:
        return "ImageMarker()"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        def from_json(value: Any) -> Any:
            raise ValueError("an image cannot be sent inside JSON: send it as a "
                             "multipart/form-data part, a raw body or a tensorwire.v1.File")

        return cs.json_or_python_schema(
            json_schema=cs.no_info_plain_validator_function(from_json),
            python_schema=cs.is_instance_schema(Image.Image),
            serialization=cs.plain_serializer_function_ser_schema(
                lambda v: f"<image {v.width}x{v.height}>", when_used="json"),
        )

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> dict[str, Any]:
        if handler.mode == "serialization":
            return {"type": "string", "format": "binary"}
        out: dict[str, Any] = {"type": "file", "format": "image"}
        if self.codec.content_type is not None:
            out["content_type"] = self.codec.content_type.pattern
        return out


class ImageProto(MessageProto):
    """A `tensorwire.v1.File` holding the encoded image."""

    codec: ImageCodec

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        try:
            return self.codec.decode(bytes(raw.content), raw.content_type or None,
                                     raw.filename or None, scope)
        except UnsupportedBody as exc:
            raise unsupported_to_field_error(exc) from None

    def fill(self, value: Any, msg: Any) -> None:
        data, media_type = encode_image(value)
        msg.content = data
        msg.content_type = media_type
        msg.filename = "image" + _extension(media_type)


class ImageHttp(HttpFacet):
    """A raw body or part, read whole (within the limits) and decoded; an image out."""

    codec: ImageCodec
    json_answer = False  # the encoded image
    json_chunks = False  # refused: an image is no event

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        return self.codec.decode(await body.read(), body.media_type, body.filename, scope)

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        return self.codec.decode(await part.read(), part.media_type, part.filename, scope)

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        data, media_type = encode_image(value)
        disposition = content_disposition("inline", "image" + _extension(media_type))
        return HttpBody(data, media_type, headers={"Content-Disposition": disposition})

    def encode_chunk(self, value: Any) -> bytes:
        raise FieldError("images cannot be streamed as server-sent events")


class ImageV2(MediaV2):
    """One BYTES element per image (any format PIL reads; the tensor's `content_type`
    is the client's claim), decoded as a raw body is; out in its own format, its media
    type in `content_type`."""

    codec: ImageCodec

    def from_element(self, item: Any, parameters: Any, scope: Scope) -> Any:
        try:
            return self.codec.decode(self.content(item), self.claimed(parameters), None, scope)
        except UnsupportedBody as exc:
            raise unsupported_to_field_error(exc) from None

    def media_element(self, value: Any) -> tuple[bytes, str | None]:
        return encode_image(value)


class ImageCodec(Codec):
    """`PIL.Image.Image`, optionally `Annotated[Image.Image, ContentType("image/png")]`."""

    def __init__(self, python_type: Any, content_type: ContentType | None,
                 extra: tuple[Any, ...] = ()) -> None:
        super().__init__(python_type, Annotated[(Image.Image, ImageMarker(self), *extra)])
        self.content_type = content_type
        body_media = content_type.pattern if content_type is not None else "image/*"
        self.http = ImageHttp(self, body_media=body_media, output_media="image/*",
                              is_file=True)
        self.proto = ImageProto(self, "tensorwire.v1.File")
        self.v2 = ImageV2(self, body_media)

    def __repr__(self) -> str:
        return f"ImageCodec({self.content_type})"

    def decode(self, data: bytes, claimed: str | None, filename: str | None, scope: Scope
               ) -> Any:
        """Decode, checking the ContentType against what the bytes are.

        The sniffer refuses plain mismatches before any decoding; PIL, which knows more
        image formats than the sniffer, then names the real format for the final check.
        """
        ct = self.content_type
        if ct is not None:
            sniffed = sniff(data[:SNIFF_BYTES])
            if sniffed is not None and not accepts(ct, sniffed):
                check_media(ct, sniffed, claimed)
        image = decode_image(data, max_pixels(scope))
        if ct is not None:
            real = canonical(Image.MIME.get((image.format or "").upper(), ""))
            check_media(ct, real or resolve_media_type(data[:SNIFF_BYTES], claimed, filename),
                        claimed)
        return image


def _extension(media_type: str) -> str:
    return mimetypes.guess_extension(media_type, strict=False) or ""


def build(base: Any, metadata: tuple[Any, ...], annotation: Any) -> Codec:
    """The registry's builder for the PIL image family."""
    content_type, extra = take_content_type(metadata, "PIL.Image.Image")
    return ImageCodec(base, content_type, extra)
