"""Running `def` methods off the event loop, with one wake-up for many results.

`loop.run_in_executor` costs every call a `concurrent.futures.Future`, its chaining to an
asyncio future, and one `call_soon_threadsafe` from the worker thread, which writes to
the loop's self-pipe: one wake-up, one syscall, one callback per call. Under load those
are most of what a `def` API costs over the same `async def` one.

A `Handoff` keeps its own worker threads. A call is an asyncio future made on the loop
and a job on a queue; a worker runs the job and appends its outcome to a deque, and only
the first outcome of a burst wakes the loop: one callback then settles every future that
is done.

Jobs wake threads the same way, in a chain rather than one each. A queue that wakes a
sleeping thread per job (`SimpleQueue`, an executor) wakes eight threads for a burst of
eight tiny calls, each then waiting for the GIL the others hold. Here a job wakes a
thread only when no other thread has been woken and not yet started; a thread that takes
a job and sees more queued wakes the next. A burst of tiny calls is drained by the first
thread, while long calls that release the GIL (a model's kernels) still spread over
every thread: each is woken by the one before as that one takes its job.
`bench/def_path.py` compares the handoff with the executor it replaces.

The threads run under Linux's SCHED_BATCH policy (`_batch_scheduling`). A worker woken
while the loop holds the CPU would otherwise preempt it at once (the wake-up bonus a
sleeper earns), only to find the GIL held and switch back: ~6 context switches for a
lone call on one busy core. A batch thread is not favoured on wake-up: it runs when
the loop blocks, and gets the GIL with the CPU (2 switches a call). Results then come
back in bursts, which grpc.aio serves more cheaply than one by one (a gRPC `def` API
fell from ~1.2x the server CPU of the same `async def` one to below it), but unbounded
bursts hold many finished calls unreleased at once (grpc's overload protection, now
off, counted those against `grpc_max_concurrent_streams`; see
`tensorwire.grpc.channel_args`) and delay the loop's other work. So the loop bounds
them: once `_YIELD_AT` calls wait, it yields the CPU (`os.sched_yield`, the GIL
released) at the start of its next pass, and the threads take them.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any


class Job:
    """One call handed to a thread: `done()` and `add_done_callback()` tell when the
    thread is through with it, even after its caller stopped waiting (a cancelled
    request's temp files stay until then; see `Context.close_after`)."""

    __slots__ = ("_callbacks", "_finished", "args", "context", "fn", "future", "lock")

    def __init__(self, future: asyncio.Future[Any], context: contextvars.Context,
                 fn: Callable[..., Any], args: tuple[Any, ...], lock: threading.Lock) -> None:
        self.future = future
        self.context = context
        self.fn = fn
        self.args = args
        self.lock = lock
        self._finished = False
        self._callbacks: list[Callable[[Job], None]] | None = None

    def done(self) -> bool:
        return self._finished

    def add_done_callback(self, callback: Callable[[Job], None]) -> None:
        with self.lock:
            if not self._finished:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        callback(self)

    def _set_finished(self) -> None:
        with self.lock:
            self._finished = True
            callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            callback(self)


#: the CPU to another thread, the GIL released meanwhile (Unix; elsewhere a no-op)
_sched_yield: Callable[[], None] = getattr(os, "sched_yield", lambda: None)


#: calls waiting for a thread at which the loop yields the CPU to the threads: 8 (the
#: default thread count) let grpc refuse ~1 % of streams at 96 calls in flight on one
#: connection under a saturated core, 4 none; 2 gave back most of the CPU gained
_YIELD_AT = 4


def _batch_scheduling() -> None:
    """Put the calling thread under SCHED_BATCH where the kernel allows it (see the
    module docstring); elsewhere, or where a sandbox refuses, nothing changes. A batch
    thread keeps its share of the CPU and is still placed on an idle core at once."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass


class Handoff:
    """A pool of threads running sync calls for one event loop's coroutines."""

    def __init__(self, threads: int, name: str = "tensorwire-api") -> None:
        #: calls not yet taken, and the wake-up lock of each sleeping thread
        self._jobs: collections.deque[Job] = collections.deque()
        self._sleeping: list[threading.Lock] = []
        #: threads woken that have not yet taken a job (at most one: see the module doc)
        self._waking = 0
        self._queue_lock = threading.Lock()
        self._done: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = \
            collections.deque()
        self._lock = threading.Lock()
        self._wake_pending = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
                         for i in range(max(1, threads))]
        self._started = False
        self._closed = False
        self._yield_at = _YIELD_AT
        self._yield_pending = False

    def run(self, fn: Callable[..., Any], *args: Any) -> Job:
        """`fn(*args)` handed to a worker thread (in the caller's context); await
        `job.future` for its result."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
        if not self._started:
            self._start()
        if self._closed:
            raise RuntimeError("the handoff is closed")
        job = Job(loop.create_future(), contextvars.copy_context(), fn, args, self._lock)
        with self._queue_lock:
            jobs = self._jobs
            jobs.append(job)
            if not self._waking and self._sleeping:
                self._waking = 1
                self._sleeping.pop().release()
        if len(jobs) >= self._yield_at and not self._yield_pending:
            self._yield_pending = True
            loop.call_soon(self._yield)
        return job

    def _yield(self) -> None:
        """On the loop, a pass after calls piled up: let the threads have the CPU if
        they are still waiting (see the module docstring)."""
        self._yield_pending = False
        if len(self._jobs) >= self._yield_at:
            _sched_yield()

    @staticmethod
    async def finished(job: Job) -> None:
        """Wait until a thread is through with `job`, even one whose caller stopped
        waiting for its result (a generator must not be closed while it runs)."""
        if job.done():
            return
        loop = asyncio.get_running_loop()
        through = loop.create_future()

        def wake(_: Job) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(lambda: through.done() or through.set_result(None))

        job.add_done_callback(wake)
        await through

    def _start(self) -> None:
        self._started = True
        for thread in self._threads:
            thread.start()

    def _take(self, wake: threading.Lock, woken: bool) -> Job | None:
        """The next job for a thread (sleeping on `wake` while there is none); None once
        the handoff is closed and drained. Wakes the next thread when more are queued."""
        jobs, queue_lock, sleeping = self._jobs, self._queue_lock, self._sleeping
        while True:
            with queue_lock:
                if woken:
                    self._waking = 0
                    woken = False
                if jobs:
                    job = jobs.popleft()
                    if jobs and not self._waking and sleeping:  # more: the next thread
                        self._waking = 1
                        sleeping.pop().release()
                    return job
                if self._closed:
                    return None
                sleeping.append(wake)
            wake.acquire()  # released by whoever pops it from `sleeping`
            woken = True

    def _work(self) -> None:
        _batch_scheduling()
        wake = threading.Lock()
        wake.acquire()
        woken = False
        while (job := self._take(wake, woken)) is not None:
            woken = False
            if job.future.cancelled():  # the caller left before a thread was free
                job._set_finished()
                continue
            try:
                outcome = (job.future, True, job.context.run(job.fn, *job.args))
            except BaseException as exc:
                if isinstance(exc, StopIteration):  # a future cannot hold one
                    exc = RuntimeError(f"{job.fn!r} raised StopIteration")
                outcome = (job.future, False, exc)
            job._set_finished()
            self._finish(outcome)
            # not kept while the thread sleeps: the last call's arguments and result
            # (a request's 64 MiB tensor, a pooled body buffer) are freed with the call
            job = outcome = None  # type: ignore[assignment]

    def _finish(self, outcome: tuple[asyncio.Future[Any], bool, Any]) -> None:
        self._done.append(outcome)
        with self._lock:
            if self._wake_pending:
                return  # the loop will settle this one with the rest of the burst
            self._wake_pending = True
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._settle)
            except RuntimeError:  # the loop closed: nobody is waiting any more
                pass

    def _settle(self) -> None:
        """On the loop: resolve every finished call's future (one wake-up, many calls)."""
        with self._lock:
            self._wake_pending = False
        done = self._done
        while done:
            future, ok, value = done.popleft()
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def shutdown(self) -> None:
        """Stop the threads once they finish the jobs queued (calls made after are
        refused); running calls are not interrupted, as an executor's are not."""
        if self._closed:
            return
        with self._queue_lock:
            self._closed = True
            sleeping, self._sleeping = self._sleeping, []
        for wake in sleeping:
            wake.release()
