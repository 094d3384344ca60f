"""A bare HTTP/2 connection for tests of what a gRPC server does to an idle connection.

grpcio hides its transport: whether the server pinged, or sent GOAWAY and why, cannot be
seen from a channel. This speaks just enough HTTP/2 (preface, SETTINGS, PING, GOAWAY)
over a plain socket to watch the frames themselves, and can answer pings or not.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS, PING, GOAWAY = 0x4, 0x6, 0x7
ACK = 0x1
#: HTTP/2 error code a gRPC server sends with GOAWAY "too_many_pings".
ENHANCE_YOUR_CALM = 0xB


@dataclass
class Frame:
    type: int
    flags: int
    stream: int
    payload: bytes


@dataclass
class Connection:
    """One HTTP/2 connection to `host:port` that sends no request."""

    host: str
    port: int
    #: Answer the server's PINGs (a live peer) or not (one that vanished).
    answer_pings: bool = True
    pings: list[float] = field(default_factory=list)
    goaway: Frame | None = None
    closed_at: float | None = None

    def __post_init__(self) -> None:
        self.sock = socket.create_connection((self.host, self.port), timeout=5)
        self.opened = time.monotonic()
        self.sock.sendall(PREFACE + self._frame(SETTINGS, 0, 0, b""))
        self._buffer = b""

    @staticmethod
    def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
        return struct.pack("!I", len(payload))[1:] + struct.pack("!BBI", kind, flags,
                                                                 stream) + payload

    def send_ping(self, data: bytes = b"tw-ping!") -> None:
        self.sock.sendall(self._frame(PING, 0, 0, data))

    def _read(self, n: int, deadline: float) -> bytes | None:
        while len(self._buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            except OSError:  # reset by the server
                chunk = b""
            if not chunk:
                self.closed_at = time.monotonic()
                raise EOFError
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def _next(self, deadline: float) -> Frame | None:
        head = self._read(9, deadline)
        if head is None:
            return None
        length = int.from_bytes(head[:3], "big")
        kind, flags, stream = struct.unpack("!BBI", head[3:])
        # a frame header came: its payload follows at once, whatever the deadline
        payload = self._read(length, time.monotonic() + 5) if length else b""
        return Frame(kind, flags, stream & 0x7FFFFFFF, payload or b"")

    def watch(self, seconds: float) -> None:
        """Read frames for `seconds` (or until the server closes), answering as set."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.closed_at is None:
            try:
                frame = self._next(deadline)
            except EOFError:
                return
            if frame is None:
                return
            if frame.type == SETTINGS and not frame.flags & ACK:
                self.sock.sendall(self._frame(SETTINGS, ACK, 0, b""))
            elif frame.type == PING and not frame.flags & ACK:
                self.pings.append(time.monotonic() - self.opened)
                if self.answer_pings:
                    self.sock.sendall(self._frame(PING, ACK, 0, frame.payload))
            elif frame.type == GOAWAY:
                self.goaway = frame

    @property
    def goaway_error(self) -> int | None:
        """The error code of the last GOAWAY (None: none came)."""
        if self.goaway is None:
            return None
        return struct.unpack("!I", self.goaway.payload[4:8])[0]

    def close(self) -> None:
        self.sock.close()
