"""Media types from bytes: the sniffer, how claims refine it, and header quoting."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from tensorwire.codecs.media import (
    OCTET_STREAM,
    canonical,
    content_disposition,
    disposition_for,
    resolve_media_type,
    safe_suffix,
    sniff,
    spellings,
)


def _image(fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4), "blue").save(buf, fmt)
    return buf.getvalue()


@pytest.mark.parametrize(("fmt", "media"), [
    ("PNG", "image/png"), ("JPEG", "image/jpeg"), ("GIF", "image/gif"),
    ("BMP", "image/bmp"), ("TIFF", "image/tiff"), ("WEBP", "image/webp"),
    ("PDF", "application/pdf"), ("ICO", "image/vnd.microsoft.icon"),
])
def test_sniffs_images_pil_writes(fmt: str, media: str) -> None:
    assert sniff(_image(fmt)[:512]) == media


@pytest.mark.parametrize(("head", "media"), [
    (b"ID3\x03\x00", "audio/mpeg"),
    (b"\xff\xfb\x90\x64", "audio/mpeg"),
    (b"\xff\xf1\x50\x80", "audio/aac"),
    (b"RIFF\x00\x00\x00\x00WAVE", "audio/wav"),
    (b"OggS\x00\x02", "audio/ogg"),
    (b"fLaC\x00", "audio/flac"),
    (b"\x00\x00\x00\x18ftypmp42", "video/mp4"),
    (b"\x00\x00\x00\x18ftypM4A ", "audio/mp4"),
    (b"\x00\x00\x00\x18ftypavif", "image/avif"),
    (b"\x1a\x45\xdf\xa3\x01webm", "video/webm"),
    (b"PK\x03\x04", "application/zip"),
    (b"\x1f\x8b\x08", "application/gzip"),
    (b"\x93NUMPY\x01\x00", "application/x-npy"),
    (b"plain words\n", "text/plain"),
    (b"BMW is a car brand", "text/plain"),  # "BM" alone is not a bitmap
    (b"caf\xc3", "text/plain"),  # a UTF-8 character cut at the end of the head
    (b"\x00\x01\x02\x03", None),
    (b"", None),
])
def test_sniffs_signatures(head: bytes, media: str | None) -> None:
    assert sniff(head) == media


def test_aliases_resolve_both_ways() -> None:
    assert canonical("Audio/MP3; charset=x") == "audio/mpeg"
    assert canonical("image/jpg") == "image/jpeg"
    assert "audio/mp3" in spellings("audio/mpeg")
    assert spellings("image/gif") == {"image/gif"}


@pytest.mark.parametrize(("head", "claimed", "filename", "expected"), [
    # The bytes win over the label.
    (b"%PDF-1.7", "image/jpeg", "photo.jpg", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/jpeg", None, "image/png"),
    # No label: the bytes, else the file name, else octet-stream.
    (b"\x89PNG\r\n\x1a\n", None, None, "image/png"),
    (b"\x00\x01\x02", None, "data.custom", OCTET_STREAM),
    (b"\x00\x01\x02", "application/x-www-form-urlencoded", None, OCTET_STREAM),
    # A claim of a format whose signature is known but absent is not believed.
    (b"\x00\x01\x02", "image/png", None, OCTET_STREAM),
    (b"\x00\x01\x02", None, "spoof.jpg", OCTET_STREAM),
    (b"x", "image/png", "one-byte.png", "text/plain"),
    # A claim that refines what the bytes show stands.
    (b"a,b\n1,2\n", "text/csv", None, "text/csv"),
    (b'{"a": 1}', "application/json", None, "application/json"),
    (b"PK\x03\x04", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
     None, "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    (b"OggS\x00", "audio/opus", None, "audio/opus"),
    # A format the sniffer does not know: the claim stands.
    (b"\x00\x01\x02", "application/x-custom", None, "application/x-custom"),
    (b"\x00\x01\x02", None, None, OCTET_STREAM),
    (b"ID3\x03", "audio/mp3", None, "audio/mpeg"),
])
def test_resolve_media_type(head: bytes, claimed: str | None, filename: str | None,
                            expected: str) -> None:
    assert resolve_media_type(head, claimed, filename) == expected


@pytest.mark.parametrize(("filename", "media", "suffix"), [
    ("photo.PNG", None, ".png"),
    ("../../etc/passwd", None, ""),
    ("..\\..\\windows\\evil.exe", None, ".exe"),
    ("archive.tar.gz", None, ".gz"),
    ("weird.p/ng", None, ""),
    ("name.with space", None, ""),
    ("x." + "a" * 30, None, ""),
    (None, "image/png", ".png"),
    (None, OCTET_STREAM, ""),
    ("noext", "audio/mpeg", ".mp3"),
])
def test_safe_suffix(filename: str | None, media: str | None, suffix: str) -> None:
    assert safe_suffix(filename, media) == suffix


def test_content_disposition_quotes_per_rfc_6266() -> None:
    assert content_disposition("inline", "a.png") == 'inline; filename="a.png"'
    assert content_disposition("attachment", "../../etc/passwd") == \
        'attachment; filename="passwd"'
    value = content_disposition("attachment", 'naïve "q".txt')
    assert value == ("attachment; filename=\"na_ve _q_.txt\"; "
                     "filename*=UTF-8''na%C3%AFve%20%22q%22.txt")
    assert content_disposition("attachment", None) == "attachment"
    assert disposition_for("image/png") == "inline"
    assert disposition_for("audio/mpeg") == "attachment"
