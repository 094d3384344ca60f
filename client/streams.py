"""The chunks of a streaming API, for `async for` (AsyncClient) and `for` (SyncClient).

An `AsyncStream` opens its call on first use: `async for chunk in client.generate(...)`
needs no `await`; `await client.generate(...)` opens it at once (and raises a bad input
there) and returns the stream. A `SyncStream` is opened by the call itself, so errors
before the first chunk raise at the call. Both close the call (cancelling it on the
server) when left early: `close()`, a `with` block, or garbage collection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Generator, Sequence
from typing import Any

_END: Any = object()


async def elements(source: Any) -> AsyncIterator[Any]:
    """The elements of a streamed input, on the client's loop, whatever was passed: an
    async iterable is awaited; a list or tuple is walked; any other iterable (a
    generator reading a microphone, say) is stepped in a thread, so that waiting for its
    next element never blocks the loop that carries the call (and others beside it)."""
    if isinstance(source, AsyncIterable):
        async for item in source:
            yield item
        return
    if isinstance(source, Sequence):
        for item in source:
            yield item
        return
    iterator = iter(source)
    while (item := await asyncio.to_thread(next, iterator, _END)) is not _END:
        yield item


class AsyncStream:
    def __init__(self, open_: Callable[[], Awaitable[AsyncIterator[Any]]],
                 adapt: Callable[[Any], Any] | None = None) -> None:
        self._open = open_
        self._adapt = adapt
        self._inner: AsyncIterator[Any] | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    async def _ensure(self) -> AsyncIterator[Any]:
        if self._inner is None:
            async with self._lock:
                if self._inner is None:
                    if self._closed:
                        raise RuntimeError("the stream is closed")
                    self._inner = await self._open()
        return self._inner

    async def _start(self) -> AsyncStream:
        await self._ensure()
        return self

    def __await__(self) -> Generator[Any, None, AsyncStream]:
        return self._start().__await__()

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> Any:
        if self._closed:
            raise StopAsyncIteration
        inner = await self._ensure()
        try:
            chunk = await inner.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            raise
        except BaseException:
            await self.aclose()
            raise
        return self._adapt(chunk) if self._adapt is not None else chunk

    async def aclose(self) -> None:
        self._closed = True
        inner, self._inner = self._inner, None
        if inner is not None:
            close = getattr(inner, "aclose", None)
            if close is not None:
                await close()

    async def __aenter__(self) -> AsyncStream:
        return await self._start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class SyncStream:
    """An AsyncStream driven from another thread through the client's event loop."""

    def __init__(self, stream: AsyncStream, loop: Any) -> None:
        self._stream = stream
        self._loop = loop  # the SyncClient's LoopThread
        self._closed = False

    def __iter__(self) -> SyncStream:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        try:
            return self._loop.run(self._stream.__anext__())
        except StopAsyncIteration:
            self._closed = True
            raise StopIteration from None
        except BaseException:
            self._closed = True
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._loop.run(self._stream.aclose())
            except RuntimeError:  # the client (and its loop) is already closed
                pass

    def __enter__(self) -> SyncStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Never block in a finalizer: schedule the close on the loop and move on.
        if not getattr(self, "_closed", True):
            self._closed = True
            self._loop.submit(self._stream.aclose())
