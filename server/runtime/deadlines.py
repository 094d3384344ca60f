"""Per-request time limits without a timer per request.

`asyncio.timeout()` schedules one timer handle per request and cancels it again on the
way out: at tens of thousands of requests per second that alone was ~6 µs of a ~70 µs
request (bench/NOTES.md, profile of bench/http_json.py). Almost every request finishes
long before its limit, so one sweeper per event loop does the same job: each request
registers its deadline in a dict, and a single periodic callback, running only while
requests are in flight, cancels the tasks whose deadline passed. A limit then fires up to
one tick late; the tick is a small fraction of the shortest limit seen (at most 50 ms).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import DeadlineExceeded

#: The sweeper checks this many times per shortest limit (bounded by _MIN/_MAX_TICK).
_TICKS_PER_LIMIT = 20
_MIN_TICK = 0.002
_MAX_TICK = 0.05


class Expired(DeadlineExceeded):
    """The awaited work ran past its limit: a DeadlineExceeded (504 /
    DEADLINE_EXCEEDED) naming the limit, so that every transport answers it as it
    answers any error, with no mapping of its own."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        super().__init__(f"the request did not complete within {limit:g} s")


class _Entry:
    __slots__ = ("cancelling", "deadline", "expired", "limit", "task")

    def __init__(self, task: asyncio.Task[Any], deadline: float, limit: float) -> None:
        self.task = task
        self.deadline = deadline
        self.limit = limit
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
        entry = _Entry(task, loop.time() + limit, limit)
        self._entries[id(entry)] = entry
        self._start(limit)
        return entry

    @staticmethod
    def cancelled(entry: _Entry) -> None:
        """Raise `Expired` if the cancellation being handled was this limit's own (and
        no one else asked for one too, as `asyncio.timeout` decides)."""
        if entry.expired and entry.task.uncancel() <= entry.cancelling:
            raise Expired(entry.limit) from None

    @staticmethod
    def leave(entry: _Entry) -> None:
        """The work finished: a cancel the sweeper sent at the last moment is taken back."""
        if entry.expired:
            entry.task.uncancel()

    def forget(self, entry: _Entry) -> None:
        del self._entries[id(entry)]

    def watch(self, limit: float) -> Watch | None:
        """One time limit for a stream, on each chunk's making (see `Watch`); None when
        not inside a task (nothing to cancel)."""
        task = asyncio.current_task()
        if task is None:
            return None
        loop = task.get_loop()
        if loop is not self._loop:
            self._loop, self._timer = loop, None
        watch = Watch(self, task, loop.time() + limit, limit)  # the first chunk starts now
        self._entries[id(watch)] = watch
        self._start(limit)
        return watch

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
            if type(entry) is Watch and (entry.holding or entry.made != entry.seen):
                # the stream moved since the last sweep: its next chunk's making began
                # at most a tick ago, so its limit counts from a tick past now
                if entry.expired:  # fired, but the chunk came (the cancel was swallowed)
                    entry.expired = False
                    entry.task.uncancel()
                entry.seen = entry.made
                entry.deadline = now + entry.limit + self._tick
            elif not entry.expired and entry.deadline <= now:
                entry.expired = True
                entry.task.cancel()
        self._timer = self._loop.call_later(self._tick, self._sweep)  # type: ignore[union-attr]

    @property
    def pending(self) -> int:
        """Requests under a limit right now (tests check nothing is left behind)."""
        return len(self._entries)


class Watch(_Entry):
    """A stream's time limit: one entry for the whole stream, on each chunk's making.

    Arming a timer (or reading the clock) per chunk cost a streamed token more than its
    write (bench/instructions.py --api tokens). The producer only counts each chunk made
    and marks while its consumer holds one (two attribute writes); the sweeper, on its
    tick, sees that the stream moved and moves its deadline on, and cancels the stream's
    task once no chunk has come for `limit` seconds of making. The time the consumer
    spends on a chunk (writing it to a slow client) never counts. A limit fires no
    earlier than `limit` after the chunk's making began, and at most three ticks later.

        watch = deadlines.watch(limit)
        try:
            async for chunk in gen:            # except CancelledError: watch.check()
                watch.made += 1
                watch.holding = True
                yield chunk                    # the consumer's time
                watch.holding = False
        finally:
            watch.close()
    """

    __slots__ = ("_deadlines", "holding", "made", "seen")

    def __init__(self, deadlines: Deadlines, task: asyncio.Task[Any], deadline: float,
                 limit: float) -> None:
        super().__init__(task, deadline, limit)
        self._deadlines = deadlines
        #: Chunks made so far, and as many as the sweeper has seen.
        self.made = 0
        self.seen = 0
        #: Whether the consumer holds a chunk (its time is not the stream's).
        self.holding = False

    def check(self) -> None:
        """Inside `except CancelledError`: raise Expired if the limit caused it (the
        same decision as a call's, `Deadlines.cancelled`); the stream ends either way."""
        Deadlines.cancelled(self)

    def close(self) -> None:
        self._deadlines._entries.pop(id(self), None)


class Unwatched:
    """What a stream with no time limit marks its chunks on (nothing reads it)."""

    __slots__ = ("holding", "made")

    def __init__(self) -> None:
        self.made = 0
        self.holding = False
