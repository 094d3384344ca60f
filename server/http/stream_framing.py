"""How the items of a streaming API are framed in an HTTP response.

Server-sent events are the default: one `data:` event per item, and a final
`event: error` when the method fails mid-stream, so clients raise what they would have
raised before the stream began.

BentoML's HTTP client does not parse server-sent events: it reads a stream as raw HTTP
chunks and decodes each chunk as one item (as a BentoML server writes them), so it got
`data: ...` frames instead of the items. It is recognised by the User-Agent it always
sends (`BentoML HTTP Client/<version>`) and answered in its own framing: each item's
bytes (text for a `str`, JSON otherwise) as one chunk, under the item's media type. It
has no error frame: a mid-stream failure ends the stream early, as with BentoML.
A client of that name that asks for `text/event-stream` gets events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..wire.sse import sse_event

BENTOML_AGENT = "BentoML HTTP Client/"
EVENT_STREAM = "text/event-stream"

_SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
}


@dataclass(frozen=True)
class Framing:
    """Headers of a streamed response and how one item (and an error) is written."""

    headers: Mapping[str, str]
    item: Callable[[bytes], bytes]
    #: The frame reporting a mid-stream error (its JSON payload); None: end the stream.
    error: Callable[[bytes], bytes] | None


SSE = Framing(_SSE_HEADERS, sse_event, lambda payload: sse_event(payload, event="error"))


def _raw(data: bytes) -> bytes:
    return data


def framing_for(headers: Mapping[str, str], item_media: str) -> Framing:
    """The framing a request's client reads (`item_media`: one item's media type)."""
    agent = headers.get("User-Agent") or ""
    if agent.startswith(BENTOML_AGENT) and EVENT_STREAM not in (headers.get("Accept") or ""):
        media = item_media + ("; charset=utf-8" if item_media.startswith("text/") else "")
        return Framing({"Content-Type": media, "Cache-Control": "no-cache",
                        "X-Accel-Buffering": "no"}, _raw, None)
    return SSE


def chunk_writer(framing: Framing, encode: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """`framing.item(encode(chunk))` as one function (for server-sent events, the
    output facet's own `sse_chunk_encoder` is that, with the common frame inline)."""
    item = framing.item
    return encode if item is _raw else lambda chunk: item(encode(chunk))
