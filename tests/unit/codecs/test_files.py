"""The Path codec and `bytes` with a ContentType: registry, schema, every wire form."""

from __future__ import annotations

import asyncio
import typing as t
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from tensorwire.codecs import REPLY, FieldError, UnsupportedBody, codec_for, pydantic_annotation
from tensorwire.codecs.containers import ListCodec
from tensorwire.codecs.files import FileCodec
from tensorwire.codecs.scalars import BytesCodec
from tensorwire.context import Context
from tensorwire.v1 import File
from tensorwire.validators import ContentType, Shape
from tests.support.parts import FakePart

MP3 = b"ID3\x03\x00\x00\x00\x00\x00\x00" + (b"\xff\xfb\x90\x64" + b"\x00" * 413) * 3
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 40



AUDIO = t.Annotated[Path, ContentType("audio/mp3")]


def test_path_is_a_file_family_codec() -> None:
    codec = codec_for(AUDIO)
    assert isinstance(codec, FileCodec)
    assert codec.http.is_file and codec.http.body_media == "audio/mp3"
    assert codec.http.output_media == "audio/mpeg"
    assert codec_for(pydantic_annotation(AUDIO)) is codec  # the marker maps back
    assert isinstance(codec_for(list[Path]), ListCodec)
    assert codec_for(list[Path]).http.repeated_parts


def test_markers_that_do_not_apply_are_definition_errors() -> None:
    with pytest.raises(TypeError, match="Shape does not apply to Path"):
        codec_for(t.Annotated[Path, Shape((1,))])
    with pytest.raises(TypeError, match="Shape does not apply"):
        codec_for(t.Annotated[bytes, Shape((1,))])


def test_schema_json_form_is_a_file_and_json_cannot_carry_one() -> None:
    adapter = TypeAdapter(pydantic_annotation(AUDIO))
    assert adapter.json_schema() == {"type": "file", "format": "audio",
                                     "content_type": "audio/mp3"}
    assert adapter.json_schema(mode="serialization") == {"type": "string", "format": "binary"}
    assert TypeAdapter(pydantic_annotation(Path)).json_schema() == {"type": "file",
                                                                    "format": "binary"}
    with pytest.raises(ValidationError, match="cannot be sent inside JSON"):
        adapter.validate_json('"/etc/passwd"')
    with pytest.raises(ValidationError):
        adapter.validate_python("/etc/passwd")  # only codecs make Paths
    assert adapter.validate_python(Path("/x")) == Path("/x")
    assert adapter.dump_json(Path("/secret/dir/out.wav")) == b'"out.wav"'


def test_upload_goes_to_a_generated_name_in_the_request_dir(ctx: Context) -> None:
    codec = codec_for(AUDIO)
    part = FakePart(MP3, "audio/mpeg", "../../etc/passwd.mp3")
    path = asyncio.run(codec.http.decode_part(part, ctx))
    assert path.parent == ctx.temp_dir
    assert path.name.startswith("upload-") and path.suffix == ".mp3"
    assert path.read_bytes() == MP3
    info = ctx.state["uploads"][path]
    assert info.filename == "../../etc/passwd.mp3"  # metadata only
    assert info.media_type == "audio/mpeg" and info.size == len(MP3)
    assert not Path("/etc/passwd.mp3").exists()


def test_upload_extension_follows_the_content_when_the_name_lies(ctx: Context) -> None:
    path = asyncio.run(codec_for(Path).http.decode_part(FakePart(PNG, None, "x.mp3"), ctx))
    assert path.suffix == ".png"
    path = asyncio.run(codec_for(Path).http.decode_part(FakePart(b"\x00\x01", None, None), ctx))
    assert path.suffix == ""


@pytest.mark.parametrize(("data", "media", "filename"), [
    (PNG, "audio/mpeg", "song.mp3"),  # lies about its type
    (b"%PDF-1.4", None, "song.mp3"),  # spoofed extension
    (b"\x00\x01\x02", "audio/mpeg", None),  # not what it claims, unrecognisable
    (b"x", None, None),  # a 1-byte file
])
def test_wrong_media_type_is_refused_and_leaves_no_file(ctx: Context, data: bytes,
                                                       media: str | None,
                                                       filename: str | None) -> None:
    codec = codec_for(AUDIO)
    with pytest.raises(UnsupportedBody, match="expected audio/mp3"):
        asyncio.run(codec.http.decode_part(FakePart(data, media, filename), ctx))
    assert list(ctx.temp_dir.iterdir()) == []


def test_fnmatch_patterns_and_lists() -> None:
    ct = t.Annotated[Path, ContentType("image/*, application/pdf")]
    codec = codec_for(ct)
    assert codec.http.output_media == "application/octet-stream"  # not one concrete type
    from tensorwire.codecs.media import accepts

    assert accepts(codec.content_type, "image/webp")
    assert accepts(codec.content_type, "application/pdf")
    assert not accepts(codec.content_type, "audio/mpeg")


def test_grpc_file_is_stored_and_checked(ctx: Context) -> None:
    codec = codec_for(AUDIO)
    path = codec.proto.from_proto(File(content=MP3, content_type="audio/mp3",
                                       filename="/abs/x.mp3"), ctx)
    assert path.parent == ctx.temp_dir and path.read_bytes() == MP3
    with pytest.raises(FieldError, match="unsupported media type image/png") as err:
        codec.proto.from_proto(File(content=PNG, content_type="audio/mp3"), ctx)
    assert err.value.type == "content_type"


def test_grpc_output_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "speech.wav"
    out.write_bytes(b"RIFF\x00\x00\x00\x00WAVEfmt ")
    codec = codec_for(Path)
    msg = File()
    codec.proto.fill(out, msg)
    assert (msg.content_type, msg.filename) == ("audio/wav", "speech.wav")
    back = codec.proto.from_proto(msg, REPLY)  # no request: a caller-owned temp file
    try:
        assert back.read_bytes() == out.read_bytes() and back.suffix == ".wav"
    finally:
        back.unlink()
        back.parent.rmdir()


def test_http_output_is_streamed_with_disposition(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB: several chunks
    out = tmp_path / "résumé.bin"
    out.write_bytes(data)
    body = codec_for(Path).http.encode(out, None)
    assert not isinstance(body.content, bytes)
    assert body.length == len(data) and body.media_type == "application/octet-stream"
    assert body.headers["Content-Disposition"] == (
        "attachment; filename=\"r_sum_.bin\"; filename*=UTF-8''r%C3%A9sum%C3%A9.bin")

    async def collect() -> list[bytes]:
        return [chunk async for chunk in body.content]

    chunks = asyncio.run(collect())
    assert len(chunks) > 1 and b"".join(chunks) == data

    img = tmp_path / "pic.png"
    img.write_bytes(PNG)
    body = codec_for(t.Annotated[Path, ContentType("image/png")]).http.encode(img, None)
    assert body.media_type == "image/png"
    assert body.headers["Content-Disposition"] == 'inline; filename="pic.png"'
    asyncio.run(body.content.aclose())


def test_missing_output_file_fails_before_any_byte(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        codec_for(Path).http.encode(tmp_path / "gone", None)


# ---------------------------------------------------------------------- bytes

PNG_BYTES = t.Annotated[bytes, ContentType("image/png")]


def test_bytes_with_content_type_is_allowed_and_declares_its_media() -> None:
    codec = codec_for(PNG_BYTES)
    assert isinstance(codec, BytesCodec)
    assert codec.http.body_media == "image/png" and codec.http.output_media == "image/png"
    body = codec.http.encode(PNG, None)
    assert (body.content, body.media_type) == (PNG, "image/png")
    wildcard = codec_for(t.Annotated[bytes, ContentType("image/*")])
    assert wildcard.http.encode(PNG, None).media_type == "image/png"  # sniffed
    assert codec_for(bytes).http.encode(b"x", None).media_type == "application/octet-stream"


def test_bytes_root_body_is_checked(ctx: Context) -> None:
    codec = codec_for(PNG_BYTES)
    assert asyncio.run(codec.http.decode_body(FakePart(PNG, "image/png"), ctx)) == PNG
    with pytest.raises(UnsupportedBody):
        asyncio.run(codec.http.decode_body(FakePart(MP3, "image/png"), ctx))
    with pytest.raises(UnsupportedBody):
        asyncio.run(codec.http.decode_part(FakePart(b'{"a": 1}', "application/json"), ctx))
    # Without a ContentType, JSON bodies stay base64 JSON text as before.
    plain = asyncio.run(codec_for(bytes).http.decode_body(FakePart(b'"eA=="', "application/json"),
                                                     ctx))
    assert plain.data == b'"eA=="'


def test_bytes_over_grpc_refuses_a_plain_mismatch_only() -> None:
    codec = codec_for(PNG_BYTES)
    assert codec.proto.from_proto(PNG, REPLY) == PNG
    assert codec.proto.from_proto(b"\x00\x01unknown", REPLY) == b"\x00\x01unknown"
    with pytest.raises(FieldError, match="unsupported media type audio/mpeg"):
        codec.proto.from_proto(MP3, REPLY)
