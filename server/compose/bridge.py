"""Dependency calls from a `def` method's thread, run on the server's event loop.

Both ways of reaching a dependency (its request plan in-process, the gRPC client
remotely) live on the event loop. A `def` method runs in a worker thread, so its call
is handed to the loop (`call`) and the thread waits for the answer; a streaming API's
chunks are pulled through one task on the loop (`SyncChunks`: one task for the whole
stream, so the stream's time limit and cancellation see one task, and nothing is read
ahead of what the thread asks for). The request's `CallFrame` comes along (the task
copies the thread's context) and holds the futures, so that the request's cancellation
cancels them.

Called on the loop's own thread, a blocking call would wait for itself: that is a
RuntimeError saying to await `to_async` instead.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from ..errors import Cancelled
from ..runtime import call_frame

_END: Any = object()


def _check_thread(loop: asyncio.AbstractEventLoop, what: str) -> None:
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return
    if running is loop:
        raise RuntimeError(
            f"{what}: a blocking dependency call on the event loop would wait for itself; "
            f"from an async method use `await self.<dependency>.to_async.<api>(...)` "
            "(streams: `async for chunk in self.<dependency>.to_async.<api>(...)`)")


def call(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], what: str) -> Any:
    """Run `coro` on `loop` and wait for its result in this (worker) thread."""
    try:
        _check_thread(loop, what)
    except RuntimeError:
        coro.close()
        raise
    frame = call_frame.current()
    if frame is not None and frame.cancelled:
        coro.close()
        frame.check()
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    forget = frame.attach(future) if frame is not None else None
    try:
        return future.result()
    except concurrent.futures.CancelledError:
        raise Cancelled(f"{what}: cancelled with the request that made it") from None
    finally:
        if forget is not None:
            forget()


class SyncChunks:
    """A streaming dependency call's chunks for `for` in a worker thread (see the
    module docstring); `close()` (or leaving a `with` block) ends the call early."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 open_: Callable[[], AsyncIterator[Any]], what: str) -> None:
        _check_thread(loop, what)
        self._loop = loop
        self._open = open_
        self._what = what
        self._queue: asyncio.Queue[concurrent.futures.Future[Any]] | None = None
        self._pump: concurrent.futures.Future[Any] | None = None
        self._forget: Callable[[], None] | None = None
        self._done = False

    def __iter__(self) -> SyncChunks:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        wanted: concurrent.futures.Future[Any] = concurrent.futures.Future()
        if self._pump is None:
            frame = call_frame.current()
            if frame is not None:
                frame.check()
            self._pump = asyncio.run_coroutine_threadsafe(self._run(wanted), self._loop)
            if frame is not None:
                self._forget = frame.attach(self._pump)
        else:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, wanted)  # type: ignore[union-attr]
        # the pump may end without answering (cancelled with the request meanwhile)
        concurrent.futures.wait((wanted, self._pump), return_when="FIRST_COMPLETED")
        if not wanted.done():
            wanted.cancel()
        try:
            chunk = wanted.result()
        except concurrent.futures.CancelledError:
            self._finish()
            raise Cancelled(f"{self._what}: cancelled with the request that made it") from None
        except BaseException:
            self._finish()
            raise
        if chunk is _END:
            self._finish()
            raise StopIteration
        return chunk

    async def _run(self, first: concurrent.futures.Future[Any]) -> None:
        """The pump: one chunk per future the thread hands over, in one task."""
        self._queue = asyncio.Queue()
        wanted = first
        chunks = self._open()
        try:
            while True:
                try:
                    chunk = await anext(chunks, _END)
                except BaseException as exc:
                    if not wanted.done():
                        wanted.set_exception(exc if isinstance(exc, Exception) else
                                             concurrent.futures.CancelledError())
                    raise
                wanted.set_result(chunk)
                if chunk is _END:
                    return
                wanted = await self._queue.get()
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    def _finish(self) -> None:
        self._done = True
        if self._forget is not None:
            self._forget()
            self._forget = None

    def close(self) -> None:
        """Stop the stream (the dependency's generator is closed, its call ended)."""
        if self._done:
            return
        self._finish()
        if self._pump is not None and not self._pump.done():
            self._pump.cancel()  # whether it waits for a chunk or for the thread

    def __enter__(self) -> SyncChunks:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self.close()


async def elsewhere(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any]) -> Any:
    """Await `coro`, which must run on `loop`, from another event loop (an instance made
    by hand, whose dependencies run on their own loop, called from async code)."""
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        future.cancel()
        raise


async def chunks_elsewhere(loop: asyncio.AbstractEventLoop,
                           open_: Callable[[], AsyncIterator[Any]]) -> AsyncIterator[Any]:
    """`open_()`'s chunks, made on `loop`, for `async for` on another event loop."""
    chunks = open_()

    async def step() -> Any:
        return await anext(chunks, _END)

    try:
        while (chunk := await elsewhere(loop, step())) is not _END:
            yield chunk
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await elsewhere(loop, close())
