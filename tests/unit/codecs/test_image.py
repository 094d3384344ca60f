"""The PIL image codec: decoding guarded against bombs and junk, encoding in own format."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from PIL import Image
from pydantic import TypeAdapter, ValidationError

from tensorwire.codecs import REPLY, FieldError, UnsupportedBody, codec_for, pydantic_annotation
from tensorwire.codecs.image import ImageCodec, decode_image, encode_image, max_pixels
from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.tempdirs import TempDirs
from tensorwire.v1 import File
from tensorwire.validators import ContentType
from tests.support.parts import FakePart


def encoded(fmt: str, size: tuple[int, int] = (16, 8), mode: str = "RGB") -> bytes:
    buf = io.BytesIO()
    Image.new(mode, size, "red" if mode != "L" else 128).save(buf, fmt)
    return buf.getvalue()


def bomb_png(side: int = 20_000) -> bytes:
    """A tiny PNG whose header claims side x side pixels (1-bit, compresses to bytes)."""
    buf = io.BytesIO()
    Image.new("1", (side, side)).save(buf, "PNG")
    return buf.getvalue()



def test_family_is_matched_and_schema_is_an_image_file() -> None:
    codec = codec_for(Image.Image)
    assert isinstance(codec, ImageCodec) and codec.http.is_file
    adapter = TypeAdapter(pydantic_annotation(Image.Image))
    assert adapter.json_schema() == {"type": "file", "format": "image"}
    assert adapter.json_schema(mode="serialization") == {"type": "string", "format": "binary"}
    with pytest.raises(ValidationError, match="cannot be sent inside JSON"):
        adapter.validate_json('"aGVsbG8="')
    im = Image.new("RGB", (2, 2))
    assert adapter.validate_python(im) is im


def test_import_tensorwire_does_not_import_pil() -> None:
    code = ("import sys, tensorwire, tensorwire.codecs.files; "
            "from tensorwire.codecs import codec_for; from pathlib import Path; "
            "codec_for(Path); assert 'PIL' not in sys.modules, 'PIL imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP"])
def test_decodes_any_format_and_keeps_it(fmt: str, ctx: Context) -> None:
    image = asyncio.run(codec_for(Image.Image).http.decode_body(FakePart(encoded(fmt)), ctx))
    assert image.size == (16, 8) and image.format == fmt


@pytest.mark.parametrize(("data", "message"), [
    (b"x", "not an image"),
    (b"", "empty"),
    (b"%PDF-1.4 not an image", "not an image"),
    (encoded("PNG", (64, 64))[:60], "cannot be decoded"),  # truncated
    (encoded("JPEG", (64, 64))[:200], "cannot be decoded"),  # truncated
])
def test_junk_and_truncated_bytes_are_field_errors(data: bytes, message: str) -> None:
    with pytest.raises(FieldError, match=message):
        decode_image(data, 10_000_000)


def test_decompression_bomb_is_refused_before_decoding() -> None:
    data = bomb_png(5_000)
    assert len(data) < 20_000  # tiny on the wire, 25 megapixels once decoded
    with pytest.raises(FieldError, match="25000000 pixels, over the limit of 1000000"):
        decode_image(data, 1_000_000)
    # Past twice PIL's own limit PIL refuses in its header check: still a FieldError.
    with pytest.raises(FieldError, match="decompression bomb"):
        decode_image(bomb_png(20_000), None)


def test_image_past_pils_warning_threshold_decodes_without_a_warning(
        monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder) -> None:
    # Between PIL's warning threshold (MAX_IMAGE_PIXELS) and its error (twice that).
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000)
    data = encoded("PNG", (40, 40))  # 1600 pixels
    with pytest.warns(Image.DecompressionBombWarning):  # PIL alone would warn
        Image.open(io.BytesIO(data))
    recwarn.clear()
    for limit in (None, 2_000):
        image = decode_image(data, limit)
        assert image.size == (40, 40) and image.getpixel((0, 0)) == (255, 0, 0)
    assert [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)] == []
    # Just as strict as before: our limit, then PIL's error past twice its own.
    with pytest.raises(FieldError, match="1600 pixels, over the limit of 1000"):
        decode_image(data, 1_000)
    with pytest.raises(FieldError, match="decompression bomb"):
        decode_image(encoded("PNG", (50, 50)), None)  # 2500 > 2 * 1000
    assert [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)] == []


def test_pixel_limit_is_configurable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert max_pixels(REPLY) == Image.MAX_IMAGE_PIXELS
    monkeypatch.setenv("TENSORWIRE_MAX_IMAGE_PIXELS", "100")
    assert max_pixels(REPLY) == 100
    ctx = Context(RequestInfo("http", "a", Headers()), temp_dirs=TempDirs(tmp_path),
                  limits={"max_image_pixels": 50})
    assert max_pixels(ctx) == 50
    with pytest.raises(FieldError, match="over the limit of 50"):
        asyncio.run(codec_for(Image.Image).http.decode_body(FakePart(encoded("PNG")), ctx))


def test_content_type_is_checked_against_the_real_format(ctx: Context) -> None:
    codec = codec_for(t.Annotated[Image.Image, ContentType("image/jpeg")])
    assert codec.http.body_media == "image/jpeg"
    ok = asyncio.run(codec.http.decode_part(FakePart(encoded("JPEG"), "image/jpeg"), ctx))
    assert ok.format == "JPEG"
    with pytest.raises(UnsupportedBody, match="image/png"):
        asyncio.run(codec.http.decode_part(FakePart(encoded("PNG"), "image/jpeg", "a.jpg"), ctx))
    with pytest.raises(UnsupportedBody):
        asyncio.run(codec.http.decode_part(FakePart(b"plain text", "image/jpeg"), ctx))


def test_grpc_file_in_and_out(ctx: Context) -> None:
    codec = codec_for(Image.Image)
    image = codec.proto.from_proto(File(content=encoded("GIF"), content_type="image/gif"), ctx)
    assert image.format == "GIF"
    with pytest.raises(FieldError, match="not an image"):
        codec.proto.from_proto(File(content=b"\x00"), ctx)
    msg = File()
    codec.proto.fill(image, msg)
    assert (msg.content_type, msg.filename) == ("image/gif", "image.gif")
    assert Image.open(io.BytesIO(msg.content)).format == "GIF"
    jpeg_only = codec_for(t.Annotated[Image.Image, ContentType("image/jpeg")])
    with pytest.raises(FieldError, match="expected image/jpeg") as err:
        jpeg_only.proto.from_proto(File(content=encoded("PNG")), REPLY)
    assert err.value.type == "content_type"


def test_encodes_in_own_format_else_png() -> None:
    jpeg = Image.open(io.BytesIO(encoded("JPEG")))
    data, media = encode_image(jpeg)
    assert media == "image/jpeg" and data[:3] == b"\xff\xd8\xff"
    new = Image.new("RGB", (3, 3))  # made in memory: no format
    assert encode_image(new)[1] == "image/png"
    rgba = Image.new("RGBA", (3, 3))
    rgba.format = "JPEG"  # JPEG cannot hold alpha: falls back to PNG
    assert encode_image(rgba)[1] == "image/png"
    body = codec_for(Image.Image).http.encode(new, None)
    assert body.media_type == "image/png"
    assert body.headers["Content-Disposition"] == 'inline; filename="image.png"'
