"""Per-request time limits without a timer per request.

`asyncio.timeout()` schedules one timer handle per request and cancels it again on the
way out: at tens of thousands of requests per second that alone was ~6 µs of a ~70 µs
request (bench/README.md, profile of bench/http_json.py). Almost every request finishes
long before its limit, so one sweeper per event loop does the same job: each request
registers its deadline in a dict, and a single periodic callback, running only while
requests are in flight, cancels the tasks whose deadline passed. A limit then fires up to
one tick late; the tick is a small fraction of the shortest limit seen (at most 50 ms).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

#: The sweeper checks this many times per shortest limit (bounded by _MIN/_MAX_TICK).
_TICKS_PER_LIMIT = 20
_MIN_TICK = 0.002
_MAX_TICK = 0.05


class Expired(Exception):
    """The awaited work ran past its limit (the caller turns it into its own error)."""


class _Entry:
    __slots__ = ("cancelling", "deadline", "expired", "task")

    def __init__(self, task: asyncio.Task[Any], deadline: float) -> None:
        self.task = task
        self.deadline = deadline
        self.cancelling = task.cancelling()
        self.expired = False


class Deadlines:
    """The deadlines of one event loop's in-flight requests, swept by one timer."""

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tick = _MAX_TICK

    async def run(self, limit: float, awaitable: Any) -> Any:
        """Await `awaitable`; past `limit` seconds cancel it and raise `Expired`."""
        entry = self.enter(limit)
        if entry is None:  # not inside a task: nothing to cancel, so no limit to enforce
            return await awaitable
        try:
            result = await awaitable
        except asyncio.CancelledError:
            self.cancelled(entry)
            raise
        else:
            self.leave(entry)
            return result
        finally:
            self.forget(entry)

    # The steps of `run` (compiled handlers inlined them once; bench/hot_path.py showed
    # no gain over calling `run`, so they call it):
    #     entry = enter(limit); try: await ...; leave(entry)
    #     except CancelledError: cancelled(entry); raise   finally: forget(entry)
    def enter(self, limit: float) -> _Entry | None:
        """Put the current task under `limit` seconds (None outside a task)."""
        task = asyncio.current_task()
        if task is None:
            return None
        loop = task.get_loop()
        if loop is not self._loop:  # first use, or a new loop (tests): its own sweeper
            self._loop, self._timer = loop, None
        entry = _Entry(task, loop.time() + limit)
        self._entries[id(entry)] = entry
        self._start(limit)
        return entry

    @staticmethod
    def cancelled(entry: _Entry) -> None:
        """Raise `Expired` if the cancellation being handled was this limit's own (and
        no one else asked for one too, as `asyncio.timeout` decides)."""
        if entry.expired and entry.task.uncancel() <= entry.cancelling:
            raise Expired from None

    @staticmethod
    def leave(entry: _Entry) -> None:
        """The work finished: a cancel the sweeper sent at the last moment is taken back."""
        if entry.expired:
            entry.task.uncancel()

    def forget(self, entry: _Entry) -> None:
        del self._entries[id(entry)]

    def watch(self, limit: float) -> Watch | None:
        """One time limit for a stream, re-armed for each chunk (see `Watch`); None when
        not inside a task (nothing to cancel)."""
        task = asyncio.current_task()
        if task is None:
            return None
        loop = task.get_loop()
        if loop is not self._loop:
            self._loop, self._timer = loop, None
        entry = _Entry(task, math.inf)  # disarmed until the first chunk is awaited
        self._entries[id(entry)] = entry
        self._start(limit)
        return Watch(self, entry, limit, loop)

    def _start(self, limit: float) -> None:
        """Make sure the sweeper runs, at least 20 times per shortest limit."""
        tick = limit / _TICKS_PER_LIMIT
        if tick < self._tick:
            self._tick = max(tick, _MIN_TICK)
            if self._timer is not None:  # a shorter limit: sweep sooner from now on
                self._timer.cancel()
                self._timer = None
        if self._timer is None:
            self._timer = self._loop.call_later(self._tick, self._sweep)  # type: ignore[union-attr]

    def _sweep(self) -> None:
        self._timer = None
        entries = self._entries
        if not entries:
            return  # idle: the next request starts the sweeper again
        now = self._loop.time()  # type: ignore[union-attr]
        for entry in list(entries.values()):
            if not entry.expired and entry.deadline <= now:
                entry.expired = True
                entry.task.cancel()
        self._timer = self._loop.call_later(self._tick, self._sweep)  # type: ignore[union-attr]

    @property
    def pending(self) -> int:
        """Requests under a limit right now (tests check nothing is left behind)."""
        return len(self._entries)


class Watch:
    """A stream's time limit: registered once, armed only while a chunk is being made.

    `Deadlines.run` per chunk registered and removed an entry for every chunk (~1.7 µs
    each, most of what a streamed chunk costs beyond the bare server's write). A stream
    arms its one entry before awaiting a chunk and disarms it after, so the time the
    consumer spends writing the chunk never counts against the limit.

        watch = deadlines.watch(limit)
        try:
            watch.arm()
            try:
                chunk = await produce()
            except asyncio.CancelledError:
                watch.check()  # raises Expired when the cancel was the limit's
                raise
            finally:
                watch.disarm()
        finally:
            watch.close()
    """

    __slots__ = ("_deadlines", "_entry", "_loop", "limit")

    def __init__(self, deadlines: Deadlines, entry: _Entry, limit: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._deadlines = deadlines
        self._entry = entry
        self._loop = loop
        self.limit = limit

    def arm(self) -> None:
        self._entry.deadline = self._loop.time() + self.limit

    def disarm(self) -> None:
        entry = self._entry
        entry.deadline = math.inf
        if entry.expired:  # fired, but the chunk came (or the cancel was swallowed)
            entry.expired = False
            entry.task.uncancel()

    def check(self) -> None:
        """Inside `except CancelledError`: raise Expired if the limit caused it."""
        entry = self._entry
        if entry.expired:
            entry.expired = False
            if entry.task.uncancel() <= entry.cancelling:
                raise Expired from None

    def close(self) -> None:
        self._deadlines._entries.pop(id(self._entry), None)
