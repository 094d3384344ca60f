"""Services that exercise what the client encodes and decodes, beyond the examples."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import threading
import typing as t
from collections.abc import Generator

from annotated_types import Ge, Le
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.errors import InvalidArgument, Overloaded


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Item(BaseModel):
    name: str = Field(min_length=1)
    qty: int = Field(ge=0)
    when: dt.datetime | None = None
    tags: list[str] = Field(default_factory=list)


class Report(BaseModel):
    total: int
    items: list[Item]
    longest: dt.timedelta
    colors: dict[str, Color]
    extra: t.Any = None
    note: str | None = None


@tensorwire.service
class Kitchen:
    """Standard types both ways: datetimes, durations, enums, models, Any, bytes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: dict[str, int] = {}

    @tensorwire.api
    def report(self, items: list[Item], color: Color = Color.RED,
               span: dt.timedelta = dt.timedelta(seconds=1), extra: t.Any = None,
               note: str | None = None) -> Report:
        return Report(total=sum(i.qty for i in items), items=items, longest=span * 2,
                      colors={i.name: color for i in items}, extra=extra, note=note)

    @tensorwire.api
    def shift(self, when: dt.datetime, by: dt.timedelta) -> dt.datetime:
        return when + by

    @tensorwire.api
    def pick(self, mode: t.Literal["fast", "slow"] = "fast") -> Color:
        return Color.GREEN if mode == "fast" else Color.RED

    @tensorwire.api
    def digest(self, data: bytes, label: str = "x") -> dict[str, t.Any]:
        """A bytes input: a multipart file part over HTTP, `bytes` over gRPC."""
        return {"label": label, "size": len(data), "sha1": hashlib.sha1(data).hexdigest()}

    @tensorwire.api
    def raw_size(self, data: bytes, /) -> int:
        """A root bytes input: the raw request body."""
        return len(data)

    @tensorwire.api
    def echo_bytes(self, data: bytes) -> bytes:
        return data[::-1]

    @tensorwire.api
    def nested(self, grid: list[list[int]], table: dict[str, list[float]]) -> dict[str, t.Any]:
        return {"rows": len(grid), "sum": sum(map(sum, grid)),
                "keys": sorted(table)}

    @tensorwire.api
    def maybe(self, value: int | None = None) -> int | None:
        return None if value is None else value * 2

    @tensorwire.api
    def headers(self, ctx: tensorwire.Context) -> dict[str, str]:
        """The request's x-demo-* and authorization headers / metadata, and the peer."""
        out = {k: v for k, v in ctx.request.headers.items()
               if k.startswith("x-demo") or k == "authorization"}
        out["peer"] = ctx.request.peer or ""
        return out

    @tensorwire.api
    def busy(self, key: str, fail_times: t.Annotated[int, Ge(0), Le(10)] = 2) -> int:
        """Overloaded (HTTP 503 / gRPC RESOURCE_EXHAUSTED) for the first `fail_times`
        calls with this key: for retry tests."""
        with self.lock:
            n = self.calls[key] = self.calls.get(key, 0) + 1
        if n <= fail_times:
            raise Overloaded(f"busy, try again (call {n})", headers={"Retry-After": "0"})
        return n

    @tensorwire.api
    def words(self, n: int = 3, fail_at: int = -1) -> Generator[str, None, None]:
        """Streams n words; raises InvalidArgument at `fail_at` (mid-stream errors)."""
        for i in range(n):
            if i == fail_at:
                raise InvalidArgument.at(["fail_at"], f"failed at {i}")
            yield f"w{i}"

    @tensorwire.api
    def slow(self, seconds: t.Annotated[float, Ge(0), Le(5)] = 1.0) -> str:
        import time

        time.sleep(seconds)
        return "done"
