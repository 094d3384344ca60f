"""The request a method is serving, as the calls it makes to other services see it.

A service that declares dependencies (`tensorwire.depends`) may call them from any of
its methods. What must cross such a call belongs to the request being served, not to
the method's arguments: its headers (trace context, request id), its deadline (the
shorter of the server's time limit and the client's), and its cancellation. The
request plan of such an API (`RequestPlan`, `APISpec.composed`) makes one `CallFrame`
per request and makes it current while the method runs: on the event loop for an
`async def` method, in the worker thread for a `def` one (its context is copied into
the thread); `current()` reads it back where the dependency call is made.

Cancellation crosses in both directions of a thread: a call made from a `def` method's
thread runs as a task on the loop, registered here (`attach`), and the request's
cancellation (the client left, the deadline passed) cancels those tasks and refuses
the thread's later calls. An `async def` method's calls run in the request's own task,
so they are cancelled with it.

A generator API's chunks are made under a frame too (`framed_chunks`): current while
each chunk is made, in a task of its own per chunk (a `def` generator's step in the pool
gets its context), so that a cancelled stream cancels its inner calls before it waits
for the step. It has no deadline of its own: a stream's time limit is per chunk, and
the dependency's own limit bounds each inner call. Leaving the stream cancels the inner
calls still running.

APIs of services without dependencies make no frame: this costs them nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from ..errors import Cancelled

if TYPE_CHECKING:
    from ..context import Context, RequestInfo

_END: Any = object()
_CURRENT: contextvars.ContextVar[CallFrame | None] = contextvars.ContextVar(
    "tensorwire_call_frame", default=None)


class CallFrame:
    """One request of a composed service: its Context, deadline and inner calls."""

    __slots__ = ("_pending", "cancelled", "ctx", "deadline", "loop")

    def __init__(self, ctx: Context, limit: float | None,
                 loop: asyncio.AbstractEventLoop) -> None:
        #: The request's Context: its headers, its id (`ctx.request`), its temp dir.
        self.ctx = ctx
        self.loop = loop
        #: When the request's time is up, on the loop's clock (None: no limit).
        self.deadline = loop.time() + limit if limit is not None else None
        self.cancelled = False
        #: What runs on the loop for the method's thread (futures of its inner calls).
        self._pending: set[Any] = set()

    @property
    def info(self) -> RequestInfo:
        return self.ctx.request

    def remaining(self) -> float | None:
        """Seconds left before the request's deadline (None: none); 0 once past it."""
        deadline = self.deadline
        if deadline is None:
            return None
        return max(deadline - self.loop.time(), 0.0)

    def check(self) -> None:
        """Refuse a new inner call of a request that was cancelled (the client left,
        or its deadline passed): its answer would go to nobody."""
        if self.cancelled:
            raise Cancelled("the request this call was made for was cancelled")

    def attach(self, pending: Any) -> Callable[[], None]:
        """Cancel `pending` (a concurrent future, a task) with the request; the function
        returned forgets it again (call it when it is done)."""
        self._pending.add(pending)
        return lambda: self._pending.discard(pending)

    def cancel(self) -> None:
        """The request is over unanswered: cancel its inner calls still running."""
        self.cancelled = True
        for pending in list(self._pending):
            pending.cancel()
        self._pending.clear()


def current() -> CallFrame | None:
    """The frame of the request being served here (None: none, e.g. outside a request,
    a batched call, or a service without dependencies)."""
    return _CURRENT.get()


def enter(frame: CallFrame) -> contextvars.Token[CallFrame | None]:
    """Make `frame` current (in this task or thread) until `leave(token)`."""
    return _CURRENT.set(frame)


def leave(token: contextvars.Token[CallFrame | None]) -> None:
    _CURRENT.reset(token)


async def framed_chunks(chunks: AsyncIterator[Any], frame: CallFrame) -> AsyncIterator[Any]:
    """`chunks`, each made with `frame` current, in a task of its own (a `def`
    generator's step in the pool carries the task's context): a cancelled stream cancels
    its inner calls first, then waits for the step (a `def` step returns only once the
    inner call it waits for is over)."""
    done = False
    try:
        while True:
            token = _CURRENT.set(frame)
            try:
                step = asyncio.ensure_future(anext(chunks, _END))
            finally:
                _CURRENT.reset(token)
            try:  # shielded: a cancel reaches this frame first, not the step
                chunk = await asyncio.shield(step)
            except asyncio.CancelledError:
                frame.cancel()
                step.cancel()
                with contextlib.suppress(BaseException):
                    await step
                raise
            if chunk is _END:
                done = True
                return
            yield chunk
    finally:
        if not done:
            frame.cancel()
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
