"""Services for the production tests: who answered (pid), slow calls, slow streams,
failures. Importable by the CLI as `tests.support.ops_service:Ops`."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncGenerator

import tensorwire


@tensorwire.service
class Ops:
    """Operational probes for workers, drain and limits."""

    @tensorwire.api
    def pid(self) -> int:
        """The worker process that answered."""
        return os.getpid()

    @tensorwire.api
    async def sleep(self, seconds: float = 1.0) -> float:
        """Answer after `seconds` (async, on the event loop)."""
        await asyncio.sleep(seconds)
        return seconds

    @tensorwire.api
    def sleep_sync(self, seconds: float = 1.0) -> float:
        """Answer after `seconds` (sync, in the thread pool)."""
        time.sleep(seconds)
        return seconds

    @tensorwire.api
    def echo(self, text: str) -> str:
        return text

    @tensorwire.api
    def concat(self, a: str, b: str, c: str) -> str:
        return a + b + c

    @tensorwire.api
    async def tick(self, n: int = 3, delay: float = 0.2) -> AsyncGenerator[int, None]:
        """Stream 0..n-1, one every `delay` seconds."""
        for i in range(n):
            await asyncio.sleep(delay)
            yield i

    @tensorwire.api
    def fail(self, text: str = "") -> str:
        """A user exception: 500 / INTERNAL without its message on the wire."""
        raise RuntimeError(f"user code failed on {text!r}")


@tensorwire.service
class Broken:
    """A model that never loads: workers exit at start-up."""

    def __init__(self) -> None:
        raise RuntimeError("model file missing")

    @tensorwire.api
    def noop(self) -> int:
        return 0
