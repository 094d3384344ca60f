"""Logging set-up: `--log-level`, `--log-format text|json`, and the access log line.

The access log (logger `tensorwire.access`, level INFO) has one line per API request with
its protocol, API, status, duration, request id and sizes. In JSON format those are
top-level keys of the line; in text format they are the message. Nothing is formatted
unless the logger is enabled for INFO, so a quiet server pays one level check per
request. Request headers (and so `Authorization`) are never logged.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

ACCESS = logging.getLogger("tensorwire.access")
_NAME = ACCESS.name
_LINE = "%s %s %s %.2fms id=%s in=%d out=%d"
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


def access(protocol: str, api: str, status: str, seconds: float, request_id: str,
           received: int, sent: int) -> None:
    """The access line of one request (the caller checked `ACCESS.isEnabledFor(INFO)`)."""
    ms = seconds * 1000.0
    # makeRecord + handle: the same record `ACCESS.info` makes, without its stack walk
    # to find the caller (a third of the cost of a line).
    ACCESS.handle(ACCESS.makeRecord(
        _NAME, logging.INFO, __file__, 0, _LINE,
        (protocol, api, status, ms, request_id, received, sent), None,
        extra={"fields": {"protocol": protocol, "api": api, "status": status,
                          "duration_ms": round(ms, 3), "request_id": request_id,
                          "bytes_in": received, "bytes_out": sent}}))
