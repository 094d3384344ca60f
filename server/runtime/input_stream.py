"""A streamed input's elements, pulled from the transport as the method asks for them.

An API parameter annotated `AsyncIterator[T]` (or `Iterator[T]` for a `def` method)
gets an `Elements` (or its blocking face, `SyncElements`): each step takes the next
raw element from the transport (a gRPC request message, a WebSocket message) and
validates it with the transport's per-element decoder, which is the unary decoder of
that wire, so an element is checked exactly as a one-value request of its type would
be. What the plan adds around each step:

- **Backpressure.** Nothing is read ahead: the next message is taken from the wire only
  when the method asks for it, so a model that consumes slowly leaves the client's
  messages in the transport's own bounded buffers (HTTP/2 flow control, aiohttp's
  paused reads) and the client's sends wait.
- **Errors at their element.** A message that fails validation, or that the transport
  cannot read as an element (a malformed or oversized message, a media type the
  element does not take), raises InvalidArgument (or PayloadTooLarge, 415...) into the
  method at its `async for`, located at the element's index (`frames.3.x`, 0-based);
  it ends the call with that error unless the method catches it, and every later step
  raises it again.
- **Limits.** At most `max_stream_elements` elements (413 / RESOURCE_EXHAUSTED past
  it), and a client that sends nothing for `stream_idle_timeout` seconds ends the call
  with 504 / DEADLINE_EXCEEDED: one timer per call, re-armed lazily, never one per
  element. The time waiting for the client's next element is not the method's: the
  call's time-limit watch (`Watch.holding`) is held while it waits.
- **Cancellation.** `close()` (the plan calls it when the call ends, however it ends)
  wakes a `def` method blocked in `next()`: it raises `Cancelled` there, so the thread
  ends instead of waiting on a call that is gone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..errors import (
    Cancelled,
    DeadlineExceeded,
    InvalidArgument,
    PayloadTooLarge,
    TensorwireError,
)

#: (one raw element, the decode scope) -> the validated arguments of a one-element call.
ElementDecoder = Callable[[Any, Any], dict[str, Any]]


def at_element(exc: TensorwireError, name: str, index: int) -> TensorwireError:
    """`exc` (raised decoding element `index` of input `name`) located at the element:
    each violation's `loc` becomes `[name, index, ...]` and the message says it."""
    detail = []
    for violation in exc.detail or [{"loc": [name], "msg": exc.message,
                                     "type": "value_error"}]:
        loc = list(violation.get("loc", []))
        rest = loc[1:] if loc[:1] == [name] else loc
        detail.append({**violation, "loc": [name, index, *rest]})
    first = detail[0]
    message = ".".join(str(p) for p in first["loc"]) + f": {first.get('msg', exc.message)}"
    if len(detail) > 1:
        message += f" (and {len(detail) - 1} more)"
    exc.detail = detail  # type: ignore[assignment]
    exc.message = message
    exc.args = (message,)
    return exc


class Elements:
    """The validated elements of one call's streamed input (see the module docstring);
    what an `async def` method iterates with `async for`."""

    __slots__ = ("_base", "_closed", "_decode", "_idle", "_idled", "_loop", "_max", "_raw",
                 "_scope", "_since", "_task", "_timer", "_waiting", "count", "failed",
                 "mark", "name")

    def __init__(self, raw: AsyncIterator[Any], decode: ElementDecoder, scope: Any,
                 name: str, max_elements: int = 0, idle: float | None = None) -> None:
        self._raw = raw
        self._decode = decode
        self._scope = scope
        #: The streamed parameter's name (where its errors are located).
        self.name = name
        self._max = max_elements
        self._idle = idle or None
        #: Elements taken from the transport so far.
        self.count = 0
        #: The error that ended the stream (re-raised by every later step).
        self.failed: TensorwireError | None = None
        #: The call's time-limit watch, held while waiting for the client (or None).
        self.mark: Any = None
        self._loop = asyncio.get_running_loop()
        self._closed = False
        self._waiting = False
        self._since = 0.0
        self._task: asyncio.Task[Any] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._idled = False
        self._base = 0

    def __aiter__(self) -> Elements:
        return self

    async def __anext__(self) -> Any:
        if self.failed is not None:
            raise self.failed
        if self._closed:
            raise Cancelled("the call is over: its stream of elements ended")
        raw = await self._next_raw()
        index = self.count
        self.count = index + 1
        if self._max and index >= self._max:
            self.failed = PayloadTooLarge(f"more than {self._max} elements in the stream "
                                          f"of {self.name!r} (max_stream_elements)")
            raise self.failed
        try:
            return self._decode(raw, self._scope)[self.name]
        except TensorwireError as exc:
            self.failed = at_element(exc, self.name, index)
            raise self.failed from None

    async def _next_raw(self) -> Any:
        """The transport's next message, waited for under the idle limit, with the
        call's time-limit watch held (the wait is the client's time)."""
        mark = self.mark
        if mark is not None:
            mark.holding = True
        self._task = asyncio.current_task()
        self._since = self._loop.time()
        self._waiting = True
        if self._idle is not None and self._timer is None:
            self._timer = self._loop.call_later(self._idle, self._check_idle)
        try:
            return await self._raw.__anext__()
        except asyncio.CancelledError:
            task = self._task
            if self._idled and task is not None and task.uncancel() <= self._base:
                self.failed = DeadlineExceeded(
                    f"no element of {self.name!r} came within {self._idle:g} s "
                    "(stream_idle_timeout)")
                raise self.failed from None
            raise
        except (InvalidArgument, PayloadTooLarge) as exc:  # the transport could not
            self.failed = at_element(exc, self.name, self.count)  # read this element
            raise self.failed from None
        except TensorwireError as exc:  # the client left, say: the stream is over
            self.failed = exc
            raise
        finally:
            self._waiting = False
            if mark is not None:
                mark.holding = False

    def _check_idle(self) -> None:
        """The idle timer: cancel the wait once it is older than the limit, else come
        back when it could be."""
        self._timer = None
        if self._closed or self._idle is None:
            return
        now = self._loop.time()
        if self._waiting and now - self._since >= self._idle and self._task is not None:
            self._idled = True
            self._base = self._task.cancelling()
            self._task.cancel()
            return
        due = self._since + self._idle if self._waiting else now + self._idle
        self._timer = self._loop.call_later(max(due - now, 0.0), self._check_idle)

    def close(self) -> None:
        """The call is over: no more steps, no idle timer."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


_END: Any = object()


class SyncElements:
    """The same elements for a `def` method in the thread pool: each `next()` runs the
    step on the event loop and waits for it (see the module docstring)."""

    __slots__ = ("_closed", "_loop", "_pending", "elements")

    def __init__(self, elements: Elements) -> None:
        self.elements = elements
        self._loop = elements._loop
        self._pending: concurrent.futures.Future[Any] | None = None
        self._closed = False

    @property
    def mark(self) -> Any:
        return self.elements.mark

    @mark.setter
    def mark(self, value: Any) -> None:
        self.elements.mark = value

    def __iter__(self) -> SyncElements:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise Cancelled("the call is over: its stream of elements ended")
        try:
            pending = asyncio.run_coroutine_threadsafe(self._step(), self._loop)
        except RuntimeError:  # the loop is closed: the server is gone
            raise Cancelled("the server stopped") from None
        self._pending = pending
        try:
            value = pending.result()
        except concurrent.futures.CancelledError:
            raise Cancelled("the call is over: its stream of elements ended") from None
        finally:
            self._pending = None
        if value is _END:
            raise StopIteration
        return value

    async def _step(self) -> Any:
        try:
            return await self.elements.__anext__()
        except StopAsyncIteration:
            return _END

    def close(self) -> None:
        """The call is over (on the loop): a `next()` waiting now raises Cancelled."""
        self._closed = True
        self.elements.close()
        pending = self._pending
        if pending is not None:
            pending.cancel()
