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
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(process)d]: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line; `extra={"fields": {...}}` adds top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
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
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def access(protocol: str, api: str, status: str, seconds: float, request_id: str,
           received: int, sent: int) -> None:
    """The access line of one request (the caller checked `ACCESS.isEnabledFor(INFO)`)."""
    ms = seconds * 1000.0
    ACCESS.info("%s %s %s %.2fms id=%s in=%d out=%d", protocol, api, status, ms, request_id,
                received, sent, extra={"fields": {
                    "protocol": protocol, "api": api, "status": status,
                    "duration_ms": round(ms, 3), "request_id": request_id,
                    "bytes_in": received, "bytes_out": sent}})
