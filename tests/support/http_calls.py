"""Plain HTTP calls for e2e tests (urllib: no client of ours in the way, and one fresh
connection per call, so SO_REUSEPORT spreads them across workers)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    #: The response headers, looked up without regard to case.
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()

    def error_locs(self) -> list[list[str | int]]:
        return [d["loc"] for d in self.json().get("detail", [])]


def request(url: str, *, method: str = "GET", data: bytes | None = None,
            headers: Mapping[str, str] | None = None, context: ssl.SSLContext | None = None,
            timeout: float = 30) -> Reply:
    """One request; an HTTP error status is a Reply like any other, never an exception."""
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def post(url: str, body: bytes | Any = None, *, content_type: str | None = "application/json",
         headers: Mapping[str, str] | None = None, method: str = "POST",
         **kw: Any) -> Reply:
    """POST `body` (JSON-encoded unless it is bytes) with its Content-Type."""
    if body is not None and not isinstance(body, bytes | bytearray):
        body = json.dumps(body).encode()
    hdrs = dict(headers or {})
    if content_type and body is not None:
        hdrs.setdefault("Content-Type", content_type)
    return request(url, method=method, data=body, headers=hdrs, **kw)


def get(url: str, **kw: Any) -> Reply:
    return post(url, None, method="GET", content_type=None, **kw)


def sse_events(body: bytes) -> list[tuple[str | None, str]]:
    """(event, data) pairs of a text/event-stream body."""
    events = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((event, "\n".join(data)))
    return events
