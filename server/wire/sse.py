"""Server-sent events (the WHATWG event-stream format), both ways.

The server frames each streamed chunk with `sse_event`; a client feeds raw chunks as
they arrive to `SSEDecoder`, which yields complete events (lines may be split across
chunks and end in LF, CR or CRLF; only `data` and `event` fields matter here). One
module, so that what is written is exactly what is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def sse_event(data: bytes, event: str | None = None) -> bytes:
    """One server-sent event; multi-line data becomes several `data:` lines."""
    # the common chunk; bytes find an int (a byte value) by memchr, ~8x faster than the
    # generic `b"\n" in data` on a token-sized chunk
    if event is None and 10 not in data and 13 not in data:
        return b"data: " + data + b"\n\n"
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    head = b"event: " + event.encode() + b"\n" if event else b""
    return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def sse_encoder(encode: Callable[[Any], bytes], text: type | None = None
                ) -> Callable[[Any], bytes]:
    """`sse_event(encode(value))` as one function, what a stream calls per chunk.

    The common frame (one `data:` line: no line break in the chunk) is made inline,
    and so, where the codec writes the values of `text` (`str`) as their UTF-8 bytes
    unchecked, is the encoding: a token had cost two Python calls besides its write,
    most of what an SSE chunk cost over bare aiohttp writing the frame in place.
    """
    def frame(value: Any) -> bytes:
        data = encode(value)
        if 10 not in data and 13 not in data:
            return b"data: " + data + b"\n\n"
        return sse_event(data)

    if text is None:
        return frame

    def frame_text(value: Any) -> bytes:
        if type(value) is not text:
            return frame(value)
        data = value.encode()
        if 10 not in data and 13 not in data:
            return b"data: " + data + b"\n\n"
        return sse_event(data)

    return frame_text


@dataclass(frozen=True)
class Event:
    data: str
    event: str = "message"


class SSEDecoder:
    """Incremental parser of an event stream."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event = ""
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[Event]:
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._pending_cr = False
        data = self._buffer + chunk
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._buffer = lines.pop()
        if data.endswith(b"\r"):
            self._pending_cr = True
        events: list[Event] = []
        for raw in lines:
            event = self._line(raw.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def close(self) -> list[Event]:
        """Any event left unterminated when the stream ended (lenient)."""
        events = self.feed(b"\n") if self._buffer else []
        if self._data:
            events.append(self._dispatch())
        return events

    def _line(self, line: str) -> Event | None:
        if line == "":
            return self._dispatch() if self._data else self._reset()
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        return None

    def _reset(self) -> None:
        self._event = ""
        return None

    def _dispatch(self) -> Event:
        event = Event("\n".join(self._data), self._event or "message")
        self._data = []
        self._event = ""
        return event
