"""Logging set-up: `--log-level`, `--log-format text|json`, and the access log line.

The access log (logger `tensorwire.access`, level INFO, on with `--access-log`) has one
line per API request, the same fields on both protocols (`ACCESS_FIELDS`):

    client    the peer address (HTTP: host; gRPC: host:port)
    protocol  http or grpc
    method    the HTTP verb, or the gRPC method name (Summarize)
    path      the HTTP path, or the full rpc (/quickstart.Quickstart/Summarize)
    api       the tensorwire API name
    status    the HTTP status code, or the gRPC status name (OK, INVALID_ARGUMENT, ...)
    bytes_in  request body / message bytes; bytes_out the answer's (streams: all chunks)
    duration_ms  from admission to the last byte
    request_id   X-Request-ID if the client sent one, else a new random id
    trace_id     the OpenTelemetry trace id, when tracing is on

In JSON format those are top-level keys of the line (beside `ts`, `level`, `logger`,
`pid`, `msg`); in text format the message is
`CLIENT PROTOCOL METHOD PATH STATUS DURATIONms in=N out=N id=ID [trace=ID]` after the
time. Nothing is formatted unless the logger is enabled for INFO, so a quiet server
pays one level check per request. Request headers (and so `Authorization`) are never
logged.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any
from urllib.parse import unquote

import orjson

ACCESS = logging.getLogger("tensorwire.access")
_NAME = ACCESS.name
_LINE = "%s %s %s %s %s %.2fms in=%d out=%d id=%s"
_LINE_TRACED = _LINE + " trace=%s"
#: The keys of an access line in JSON format, in order (trace_id only when tracing).
ACCESS_FIELDS = ("client", "protocol", "method", "path", "api", "status", "bytes_in",
                 "bytes_out", "duration_ms", "request_id", "trace_id")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"


class _SecondCache:
    """strftime once per second, not once per line (a busy server logs thousands)."""

    __slots__ = ("_convert", "_fmt", "_second", "_text")

    def __init__(self, fmt: str, convert) -> None:
        self._fmt, self._convert = fmt, convert
        self._second, self._text = -1, ""

    def __call__(self, created: float) -> str:
        second = int(created)
        if second != self._second:
            self._second, self._text = second, time.strftime(self._fmt, self._convert(created))
        return self._text


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._seconds = _SecondCache(self.default_time_format, self.converter)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return f"{self._seconds(record.created)},{int(record.msecs):03d}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line; `extra={"fields": {...}}` adds top-level keys."""

    def __init__(self) -> None:
        super().__init__()
        self._seconds = _SecondCache("%Y-%m-%dT%H:%M:%S", time.gmtime)

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": f"{self._seconds(record.created)}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "pid": record.process,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            line.update(fields)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure(level: str = "info", fmt: str = "text") -> None:
    """Route every logger to stderr in the chosen format (replaces earlier handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def client_address(peer: str | None) -> str:
    """The client as a log shows it: `1.2.3.4` (HTTP), `1.2.3.4:5678` (gRPC, whose peer
    string is `ipv4:1.2.3.4:5678` or `ipv6:%5B::1%5D:5678`); `-` when unknown."""
    if not peer:
        return "-"
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            return unquote(peer[len(prefix):])
    return peer


def access(client: str, protocol: str, method: str, path: str, api: str, status: str,
           seconds: float, request_id: str, received: int, sent: int,
           trace_id: str | None = None) -> None:
    """The access line of one request (the caller checked `ACCESS.isEnabledFor(INFO)`)."""
    ms = seconds * 1000.0
    fields = {"client": client, "protocol": protocol, "method": method, "path": path,
              "api": api, "status": status, "bytes_in": received, "bytes_out": sent,
              "duration_ms": round(ms, 3), "request_id": request_id}
    args: tuple[Any, ...] = (client, protocol, method, path, status, ms, received, sent,
                             request_id)
    line = _LINE
    if trace_id is not None:
        fields["trace_id"] = trace_id
        args += (trace_id,)
        line = _LINE_TRACED
    # makeRecord + handle: the same record `ACCESS.info` makes, without its stack walk
    # to find the caller (a third of the cost of a line).
    ACCESS.handle(ACCESS.makeRecord(_NAME, logging.INFO, __file__, 0, line, args, None,
                                    extra={"fields": fields}))
