"""An event loop on a daemon thread: how `SyncClient` runs the async client.

Every SyncClient of a process shares one (`shared_loop`). Calls from any thread are
submitted to it with `run_coroutine_threadsafe`, so each client's aiohttp session / gRPC
channels are only ever used on that loop (neither is thread-safe), while many threads'
calls are in flight at once. It works the same inside a program that already runs an
event loop (Jupyter).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


_shared: LoopThread | None = None
_shared_lock = threading.Lock()


def shared_loop() -> LoopThread:
    """The process's one client loop thread, started on first use (again in a forked
    child, whose copy has no thread).

    Never closed: grpc.aio delivers a channel's late completions (after its close, when
    the channel is collected) to the loop the channel ran on, from its poller thread. A
    loop per client, closed with it, turned each into an "Event loop is closed"
    traceback printed by whichever client ran next."""
    global _shared
    with _shared_lock:
        if _shared is None or not _shared.running or _shared.pid != os.getpid():
            _shared = LoopThread()
        return _shared


class LoopThread:
    def __init__(self, name: str = "tensorwire-client") -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self._started = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._started.wait()
        self._stopped = False

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    @property
    def running(self) -> bool:
        return not self._stopped and self.thread.is_alive()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T] | None:
        """Schedule `coro` without waiting (None, and the coroutine closed, if stopped)."""
        if not self.running:
            coro.close()
            return None
        try:
            return asyncio.run_coroutine_threadsafe(coro, self.loop)
        except RuntimeError:  # the loop closed in between
            coro.close()
            return None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop and wait for its result (re-raising its exception)."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a SyncClient cannot be called from its own event loop "
                               "thread; use AsyncClient inside async code")
        future = self.submit(coro)
        if future is None:
            raise RuntimeError("the client is closed")
        try:
            return future.result()
        except BaseException:
            # KeyboardInterrupt etc. in the waiting thread: cancel the call itself too.
            if not future.done():
                future.cancel()
            raise

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if threading.current_thread() is self.thread:
            self.loop.stop()
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            return
        self.thread.join(10)
