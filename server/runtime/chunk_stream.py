"""A generator API's stream, for a transport to iterate in its own loop.

A streamed token is cheap to make and to write, so what sits between the two is most of
its cost: an async generator layer between the method's generator and the transport's
write loop cost ~1.2k instructions a chunk (bench/instructions.py --api tokens). A
`Stream` hands the transport the method's own async generator (`chunks`; a driver
generator only for a `def` generator, stepped in the pool, or device outputs, copied to
the host) and the stream's time-limit marks (`Deadlines.watch`), which the transport
writes per chunk:

    stream = runtime.open_stream(api, kwargs, ctx)
    mark = stream.mark
    try:
        async for chunk in stream.chunks:
            mark.made += 1
            mark.holding = True          # the transport's time with the chunk
            await write(chunk)
            mark.holding = False
    except asyncio.CancelledError:
        stream.check()                   # DeadlineExceeded when the limit fired
        raise
    finally:
        await stream.aclose()

`ServiceRuntime.stream` is that loop as an async generator, for transports that hand
the chunks on by yielding (grpc.aio's stream handlers).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..context import Context
from .deadlines import Expired, Unwatched, Watch


class Stream:
    """The chunks of one call of a generator API, its time-limit marks and its cleanup."""

    __slots__ = ("_closed", "_ctx", "_gen", "_timed_out", "_watch", "chunks", "inputs",
                 "mark")

    def __init__(self, chunks: AsyncIterator[Any], gen: Any, watch: Watch | None,
                 timed_out: Callable[[], Exception], ctx: Context | None) -> None:
        #: What the transport iterates: host-side chunks as the method makes them.
        self.chunks = chunks
        #: Where the transport marks each chunk made and its hold on it (`Watch`).
        self.mark: Watch | Unwatched = watch if watch is not None else Unwatched()
        self._gen = gen
        self._watch = watch
        self._timed_out = timed_out
        self._ctx = ctx
        self._closed = False
        #: A streamed input the method iterates (`input_stream`), closed with the stream.
        self.inputs: Any = None

    def check(self) -> None:
        """Inside `except CancelledError`: raise the stream's DeadlineExceeded if its
        time limit caused the cancel (else return, and the caller re-raises)."""
        if self._watch is not None:
            try:
                self._watch.check()
            except Expired:
                raise self._timed_out() from None

    async def aclose(self) -> None:
        """End the stream: its limit unregistered, its Context cancelled (a `def`
        generator still stepping may poll it and stop), its generator closed. Safe to
        call twice, and before the first chunk."""
        if self._closed:
            return
        self._closed = True
        if self._watch is not None:
            self._watch.close()
        if self._ctx is not None:
            self._ctx.cancel()
        if self.inputs is not None:  # wakes a `def` generator waiting for an element
            self.inputs.close()
        with contextlib.suppress(Exception):
            if self.chunks is not self._gen:  # a driver: it closes what it drives
                await self.chunks.aclose()  # type: ignore[attr-defined]
            if hasattr(self._gen, "aclose"):
                await self._gen.aclose()

    def __del__(self) -> None:
        # A transport that never closed it (a bug) must not leave a limit registered:
        # the sweeper would cancel whatever its task does next.
        if not self._closed and self._watch is not None:
            self._watch.close()
