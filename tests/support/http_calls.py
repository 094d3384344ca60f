"""Plain HTTP calls for e2e tests (urllib: no client of ours in the way)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode()

    def error_locs(self) -> list[list[str | int]]:
        return [d["loc"] for d in self.json().get("detail", [])]


def post(url: str, body: bytes | Any = None, *, content_type: str | None = "application/json",
         headers: dict[str, str] | None = None, method: str = "POST",
         timeout: float = 30) -> Reply:
    if body is not None and not isinstance(body, bytes | bytearray):
        body = json.dumps(body).encode()
    hdrs = dict(headers or {})
    if content_type and body is not None:
        hdrs.setdefault("Content-Type", content_type)
    req = urllib.request.Request(url, data=body, headers=hdrs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return Reply(r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())


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
