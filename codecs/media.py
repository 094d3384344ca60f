"""Media types of uploaded bytes: what the bytes are, not what the client says they are.

A client's `Content-Type` and file name are claims. `resolve_media_type` trusts the
bytes first: a small magic-number sniffer recognises the common image, audio, video,
document and archive formats (no libmagic needed). A claim is used only where it refines
what the bytes show (a `.docx` is a zip, `text/csv` is text) or where the bytes are of a
format the sniffer does not know. A claim of a format whose signature *is* known but
absent from the bytes (a "photo.jpg" that is a PDF, a 1-byte "image") is not believed.
"""

from __future__ import annotations

import mimetypes
import re
import urllib.parse
from pathlib import PurePath

from ..validators import ContentType
from ..wire.field_error import FieldError
from .http_facet import UnsupportedBody

#: How many leading bytes `sniff` looks at.
SNIFF_BYTES = 512

OCTET_STREAM = "application/octet-stream"

#: Claims that say nothing about the content (curl --data-binary sends form-urlencoded).
GENERIC = frozenset({
    "", OCTET_STREAM, "binary/octet-stream", "application/x-www-form-urlencoded",
    "application/unknown", "multipart/form-data",
})

#: Common spellings of one media type, mapped to the registered name.
_ALIASES = {
    "audio/mp3": "audio/mpeg", "audio/mpeg3": "audio/mpeg", "audio/x-mp3": "audio/mpeg",
    "audio/x-mpeg": "audio/mpeg", "audio/x-mpeg-3": "audio/mpeg",
    "image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg",
    "audio/x-wav": "audio/wav", "audio/wave": "audio/wav", "audio/vnd.wave": "audio/wav",
    "audio/x-flac": "audio/flac", "audio/x-m4a": "audio/mp4", "audio/m4a": "audio/mp4",
    "image/x-png": "image/png", "image/x-ms-bmp": "image/bmp", "image/x-bmp": "image/bmp",
    "image/x-icon": "image/vnd.microsoft.icon", "application/x-zip-compressed":
    "application/zip", "application/x-gzip": "application/gzip", "application/x-pdf":
    "application/pdf", "video/x-matroska": "video/matroska", "audio/x-ogg": "audio/ogg",
}
_SPELLINGS: dict[str, set[str]] = {}
for _alias, _name in _ALIASES.items():
    _SPELLINGS.setdefault(_name, {_name}).add(_alias)


def canonical(media_type: str | None) -> str:
    """Lower-case, without parameters, aliases resolved ("" when absent)."""
    if not media_type:
        return ""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def spellings(media_type: str) -> set[str]:
    """Every name a media type goes by (a ContentType("audio/mp3") matches audio/mpeg)."""
    name = canonical(media_type)
    return _SPELLINGS.get(name, {name})


def _ftyp(head: bytes) -> str | None:
    """ISO base media files (MP4, M4A, MOV, HEIC, AVIF) by their `ftyp` brand."""
    if len(head) < 12 or head[4:8] != b"ftyp":
        return None
    brand = head[8:12]
    if brand in (b"avif", b"avis"):
        return "image/avif"
    if brand in (b"heic", b"heix", b"heim", b"heis", b"mif1", b"msf1"):
        return "image/heic"
    if brand in (b"M4A ", b"M4B ", b"M4P "):
        return "audio/mp4"
    if brand == b"qt  ":
        return "video/quicktime"
    if brand.startswith(b"3gp"):
        return "video/3gpp"
    return "video/mp4"


def _riff(head: bytes) -> str | None:
    if len(head) < 12 or head[:4] != b"RIFF":
        return None
    return {b"WAVE": "audio/wav", b"WEBP": "image/webp", b"AVI ": "video/x-msvideo"}.get(
        head[8:12])


def _mp3(head: bytes) -> str | None:
    if head[:3] == b"ID3":
        return "audio/mpeg"
    # An MPEG audio frame header: 11 sync bits, then a version and a layer that are set.
    if len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xE0) == 0xE0:
        version, layer = (head[1] >> 3) & 3, (head[1] >> 1) & 3
        if version != 1 and layer != 0:
            return "audio/mpeg"
    return None


def _bmp(head: bytes) -> str | None:
    # "BM" alone would match text; the DIB header that follows has one of a few sizes.
    if head[:2] == b"BM" and len(head) >= 18 and int.from_bytes(head[14:18], "little") in (
            12, 16, 40, 52, 56, 64, 108, 124):
        return "image/bmp"
    return None


def _aiff(head: bytes) -> str | None:
    if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "audio/aiff"
    return None


def _aac(head: bytes) -> str | None:
    # ADTS: 12 sync bits, layer 00 (an MPEG frame has a non-zero layer).
    if len(head) >= 2 and head[0] == 0xFF and (head[1] & 0xF6) == 0xF0:
        return "audio/aac"
    return None


_PREFIXES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"\x00\x00\x01\x00", "image/vnd.microsoft.icon"),
    (b"8BPS", "image/vnd.adobe.photoshop"),
    (b"qoif", "image/qoi"),
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"\x93NUMPY", "application/x-npy"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"#!AMR", "audio/amr"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),
    (b"\x00\x00\x01\xba", "video/mpeg"),
    (b"\x00\x00\x01\xb3", "video/mpeg"),
    (b"\xff\x0a", "image/jxl"),
    (b"\x00\x00\x00\x0cJXL \r\n\x87\n", "image/jxl"),
)
_CHECKS = (_ftyp, _riff, _bmp, _aiff, _aac, _mp3)

# Bytes that never occur in text (C0 controls other than tab, LF, FF, CR, ESC).
_BINARY = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f]")


def sniff(head: bytes) -> str | None:
    """The media type the leading bytes show, or None when they show no known format.

    Text (UTF-8 without control bytes) is `text/plain`; SVG and other XML formats are
    left to the claim that refines it.
    """
    for prefix, media in _PREFIXES:
        if head.startswith(prefix):
            if media == "video/webm" and b"matroska" in head[:64]:
                return "video/matroska"
            return media
    for check in _CHECKS:
        media = check(head)
        if media:
            return media
    if head and not _BINARY.search(head):
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(head) - 3:  # a multi-byte char cut at the end is fine
                return None
        return "text/plain"
    return None


#: Formats `sniff` recognises: a claim of one of these that the bytes do not bear out is
#: false (a spoofed extension, a truncated or empty file).
KNOWN = frozenset(
    {m for _, m in _PREFIXES} | {
        "image/avif", "image/heic", "audio/mp4", "video/quicktime", "video/3gpp",
        "video/mp4", "audio/wav", "image/webp", "video/x-msvideo", "audio/mpeg",
        "audio/aac", "video/matroska", "image/bmp", "audio/aiff",
    })

_TEXTUAL = ("text/", "application/json", "application/xml", "application/javascript",
            "application/x-ndjson", "application/yaml", "application/x-yaml",
            "application/toml", "application/sql", "image/svg+xml")


def _refines(claim: str, sniffed: str) -> bool:
    """Whether a claimed type is a more specific reading of what the bytes show."""
    if claim == sniffed:
        return True
    if sniffed == "text/plain":
        return claim.startswith(_TEXTUAL) or claim.endswith(("+json", "+xml"))
    if sniffed == "application/zip":
        return claim.endswith("+zip") or claim.startswith("application/vnd.") or claim in {
            "application/java-archive", "application/x-zip"}
    if sniffed == "application/gzip":
        return claim in {"application/x-tar+gzip", "application/x-gtar"}
    if sniffed in ("audio/ogg", "video/webm", "video/matroska", "video/mp4"):
        # Containers: audio-only and video flavours share one signature.
        family = {"audio/ogg": "ogg", "video/webm": "webm", "video/matroska": "matroska",
                  "video/mp4": "mp4"}[sniffed]
        return claim.split("/", 1)[-1] in {family, "opus", "x-" + family} or (
            sniffed == "audio/ogg" and claim == "application/ogg")
    return False


def guess_from_name(filename: str | None) -> str:
    """The media type a file name's extension suggests ("" if none)."""
    if not filename:
        return ""
    guessed, _ = mimetypes.guess_type(PurePath(filename).name, strict=False)
    return canonical(guessed)


def resolve_media_type(head: bytes, claimed: str | None = None,
                       filename: str | None = None) -> str:
    """The media type of uploaded content: sniffed, refined by a claim that fits it.

    `claimed` is the client's Content-Type; where it is absent or generic the file
    name's extension stands in for it. Never returns "": unknown is octet-stream.
    """
    claim = canonical(claimed)
    if claim in GENERIC:
        claim = guess_from_name(filename)
    sniffed = sniff(head)
    if sniffed is not None:
        return claim if claim and _refines(claim, sniffed) else sniffed
    if not claim or claim in KNOWN:
        # Nothing recognisable, or a claim the bytes should have borne out but do not.
        return OCTET_STREAM
    return claim


# ---------------------------------------------------------------------- names on the wire

_UNSAFE_EXT = re.compile(r"[^a-z0-9]")


def safe_suffix(filename: str | None, media_type: str | None = None) -> str:
    """A file-system-safe extension for a stored upload: `.png`, or "" for none.

    Taken from the client's file name when it is short and plain, else from the
    media type; never anything that could form a path.
    """
    if filename:
        name = PurePath(filename.replace("\\", "/")).name
        _, dot, ext = name.rpartition(".")
        ext = ext.lower()
        if dot and ext and len(ext) <= 10 and not _UNSAFE_EXT.search(ext):
            return "." + ext
    if media_type and media_type not in GENERIC:
        ext = mimetypes.guess_extension(canonical(media_type), strict=False)
        if ext:
            return ext
    return ""


def content_disposition(disposition: str, filename: str | None) -> str:
    """A Content-Disposition header value with the file name quoted per RFC 6266/5987.

    An ASCII fallback `filename=` for old clients, and `filename*=UTF-8''...` whenever
    the name is not plain ASCII.
    """
    if not filename:
        return disposition
    name = PurePath(filename.replace("\\", "/")).name or "file"
    fallback = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\%' else "_" for c in name)
    value = f'{disposition}; filename="{fallback}"'
    if fallback != name:
        value += "; filename*=UTF-8''" + urllib.parse.quote(name, safe="")
    return value


def disposition_for(media_type: str) -> str:
    """Images are shown by the browser (`inline`); anything else is downloaded."""
    return "inline" if canonical(media_type).startswith("image/") else "attachment"


# ---------------------------------------------------------------------- checks


def accepts(content_type: ContentType | None, media_type: str) -> bool:
    """Whether a resolved media type passes a ContentType, alias spellings included."""
    if content_type is None:
        return True
    return any(content_type.matches(name) for name in spellings(media_type))


def check_media(content_type: ContentType | None, media_type: str, claimed: str | None
                ) -> None:
    """Raise UnsupportedBody when the content is not of an accepted media type."""
    if accepts(content_type, media_type):
        return
    assert content_type is not None
    said = canonical(claimed)
    how = f" (sent as {said})" if said and said != media_type else ""
    raise UnsupportedBody(f"{media_type}{how}", content_type.pattern)


def unsupported_to_field_error(exc: UnsupportedBody) -> FieldError:
    """The gRPC form of a media-type mismatch: a field violation (INVALID_ARGUMENT)."""
    return FieldError(f"unsupported media type {exc.media_type}; expected {exc.accepted}",
                      type="content_type")
