"""A service to load one gRPC channel with: a `def` call that holds a thread, an
`async def` echo, and a short server stream. Importable by the CLI as
`tests.support.busy_service:Busy`; `Busy.peak` is read over `/peak` to see how many
calls ran at once."""

from __future__ import annotations

import asyncio
import threading
import time
import typing as t

import tensorwire

_lock = threading.Lock()
_running = 0
_peak = 0


@tensorwire.service
class Busy:
    """Calls that take a while, to crowd a connection."""

    @tensorwire.api
    def hold(self, x: int = 0, seconds: float = 0.05) -> int:
        """Hold a worker thread for `seconds`, then answer `x`."""
        global _running, _peak
        with _lock:
            _running += 1
            _peak = max(_peak, _running)
        try:
            time.sleep(seconds)
        finally:
            with _lock:
                _running -= 1
        return x

    @tensorwire.api
    async def wait(self, x: int = 0, seconds: float = 0.05) -> int:
        """Wait `seconds` on the loop (no thread), counting calls in flight."""
        global _running, _peak
        _running += 1
        _peak = max(_peak, _running)
        try:
            await asyncio.sleep(seconds)
        finally:
            _running -= 1
        return x

    @tensorwire.api
    async def echo(self, x: int = 0) -> int:
        return x

    @tensorwire.api
    async def count(self, n: int = 3) -> t.AsyncGenerator[int, None]:
        """Stream 0..n-1."""
        for i in range(n):
            yield i

    @tensorwire.api
    async def peak(self, reset: bool = False) -> int:
        """The most calls of `hold` / `wait` that ran at once so far."""
        global _peak
        seen = _peak
        if reset:
            _peak = 0
        return seen
