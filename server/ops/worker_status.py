"""A worker's word to its supervisor: "ready", or the report of why it could not start;
then, while it serves, the services it loaded or unloaded (model control), which the
supervisor tells the other workers (`{"control": "load", "service": name}` on their
stdin) and every worker it starts later (`"loaded"` in its settings line).

One pipe per worker, the write end inherited by the worker (its number travels in the
settings line on stdin), one JSON line per message. Why a channel rather than the
worker's own log: a service whose `__init__` always raises fails in every worker at
once, and the supervisor, which alone knows whether the server was ever ready, prints
that report once and stops, instead of every worker printing it and being restarted.
"""

from __future__ import annotations

import contextlib
import json
import os


class WorkerStatus:
    """The worker's end: `ready()` once it serves, `failed(report)` when it cannot (the
    last word), `control(op, service)` for each change of what it serves."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def ready(self) -> None:
        self._send({"ready": True})

    def failed(self, report: str) -> None:
        self._send({"failed": report})
        self.close()

    def control(self, op: str, service: str) -> None:
        self._send({"control": op, "service": service})

    def _send(self, message: dict[str, object]) -> None:
        if self.fd is None:
            return
        data = json.dumps(message).encode() + b"\n"
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:  # the supervisor is gone: nobody to tell
            self.close()

    def close(self) -> None:
        """The supervisor reads EOF (also when this process ends)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class StatusReader:
    """The supervisor's end of one worker's pipe, read without blocking."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd: int | None = fd
        self.ready = False
        self.report: str | None = None
        #: (op, service) changes the worker made, not yet relayed.
        self.controls: list[tuple[str, str]] = []
        self._buffer = b""

    def poll(self) -> None:
        """Take what the worker wrote so far; close the pipe at its end."""
        while self.fd is not None:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self.close()
                break
            self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        if self.fd is None and self._buffer:  # a last line without its newline
            lines.append(self._buffer)
            self._buffer = b""
        for line in lines:
            if line:
                self._take(line)

    def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return  # not the worker's (nothing else writes here); nothing to act on
        if message.get("ready") is True:
            self.ready = True
        elif isinstance(message.get("failed"), str):
            self.report = message["failed"]
        elif message.get("control") in ("load", "unload") and isinstance(
                message.get("service"), str):
            self.controls.append((message["control"], message["service"]))

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
