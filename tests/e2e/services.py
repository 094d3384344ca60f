"""Small services that exist to exercise transport behaviour (timing, context, limits)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Generator

import tensorwire

#: What the services observed, for tests to inspect (per process).
EVENTS: dict[str, list] = {"closed": [], "produced": [], "cancelled": []}
GATE = threading.Event()


@tensorwire.service
class Probe:
    """Timing, cancellation and Context behaviour."""

    @tensorwire.api
    async def sleepy(self, seconds: float = 0.0) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @tensorwire.api
    def blocking(self, seconds: float = 0.0) -> str:
        time.sleep(seconds)
        return "done"

    @tensorwire.api
    async def ticks(self, n: int = 3, delay: float = 0.0, tag: str = "") \
            -> AsyncGenerator[str, None]:
        try:
            for i in range(n):
                EVENTS["produced"].append((tag, i, time.monotonic()))
                yield f"tick {i}"
                await asyncio.sleep(delay)
        finally:
            EVENTS["closed"].append(tag)

    @tensorwire.api
    def sync_ticks(self, n: int = 3, delay: float = 0.0, tag: str = "") \
            -> Generator[str, None, None]:
        try:
            for i in range(n):
                EVENTS["produced"].append((tag, i, time.monotonic()))
                yield f"tick {i}"
                time.sleep(delay)
        finally:
            EVENTS["closed"].append(tag)

    @tensorwire.api
    def headers(self, ctx: tensorwire.Context, status: int = 200) -> dict[str, str]:
        ctx.response.status_code = status
        ctx.response.headers["X-Probe"] = "yes"
        return {"protocol": ctx.request.protocol,
                "x-custom": ctx.request.headers.get("x-custom", ""),
                "api": ctx.request.api}

    @tensorwire.api
    def echo_bytes(self, data: bytes) -> int:
        return len(data)

    @tensorwire.api
    async def cancellable(self, seconds: float = 5.0, tag: str = "") -> str:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            EVENTS["cancelled"].append(tag)
            raise
        return "finished"
