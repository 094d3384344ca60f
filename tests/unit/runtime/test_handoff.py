"""The handoff that runs `def` methods: results, errors, context, cancellation, wake-ups."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time

import pytest

from tensorwire.runtime import handoff as handoff_module
from tensorwire.runtime.handoff import Handoff

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


async def test_results_errors_and_the_callers_context_reach_the_thread() -> None:
    handoff = Handoff(2)
    try:
        assert await handoff.run(lambda a, b: a + b, 2, 3).future == 5
        with pytest.raises(ZeroDivisionError):
            await handoff.run(lambda: 1 / 0).future
        with pytest.raises(RuntimeError, match="StopIteration"):
            await handoff.run(next, iter(())).future
        VAR.set("request-7")
        assert await handoff.run(VAR.get).future == "request-7"
        name = await handoff.run(lambda: threading.current_thread().name).future
        assert name.startswith("tensorwire-api")
    finally:
        handoff.shutdown()


async def test_a_burst_of_results_wakes_the_loop_once_per_burst() -> None:
    """200 calls finishing while the loop is busy are settled by far fewer callbacks."""
    handoff = Handoff(4)
    settles = 0
    settle = handoff._settle

    def counting() -> None:
        nonlocal settles
        settles += 1
        settle()

    handoff._settle = counting  # type: ignore[method-assign]
    try:
        jobs = [handoff.run(time.sleep, 0.001) for _ in range(200)]
        time.sleep(0.5)  # the loop is blocked: every result queues behind one wake-up
        await asyncio.gather(*(j.future for j in jobs))
        assert 1 <= settles < 20, settles
    finally:
        handoff.shutdown()


async def test_a_cancelled_call_still_tells_when_its_thread_is_through() -> None:
    handoff = Handoff(1)
    release = threading.Event()
    try:
        running = handoff.run(release.wait, 5)
        queued = handoff.run(lambda: "never")
        await asyncio.sleep(0.05)
        running.future.cancel()
        queued.future.cancel()
        assert not running.done()  # the thread is still in the call
        seen: list[object] = []
        running.add_done_callback(seen.append)
        waiter = asyncio.ensure_future(handoff.finished(running))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        release.set()
        await asyncio.wait_for(waiter, 5)
        assert seen == [running] and running.done()
        await asyncio.wait_for(handoff.finished(queued), 5)  # skipped, yet finished
    finally:
        handoff.shutdown()


async def test_a_closed_handoff_refuses_new_calls() -> None:
    handoff = Handoff(1)
    assert await handoff.run(int, "4").future == 4
    handoff.shutdown()
    with pytest.raises(RuntimeError, match="closed"):
        handoff.run(int, "5")


async def test_calls_that_block_spread_over_every_thread() -> None:
    """Threads wake each other in a chain: four calls that each wait for the other three
    (a model's kernels releasing the GIL) all run at once on four threads."""
    handoff = Handoff(4)
    barrier = threading.Barrier(4, timeout=5)
    try:
        jobs = [handoff.run(barrier.wait) for _ in range(4)]
        indexes = await asyncio.wait_for(asyncio.gather(*(j.future for j in jobs)), 10)
        assert sorted(indexes) == [0, 1, 2, 3]
    finally:
        handoff.shutdown()


async def test_calls_queued_before_shutdown_still_run() -> None:
    handoff = Handoff(1)
    release = threading.Event()
    try:
        first = handoff.run(release.wait, 5)
        queued = [handoff.run(lambda i=i: i * 2) for i in range(3)]
    finally:
        handoff.shutdown()
    release.set()
    assert await asyncio.wait_for(first.future, 5) is True
    assert [await asyncio.wait_for(j.future, 5) for j in queued] == [0, 2, 4]


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="a Linux scheduling policy")
async def test_threads_run_under_batch_scheduling() -> None:
    """A woken thread must not preempt the loop for a GIL the loop holds (see the
    module docstring); the loop's own thread keeps its policy."""
    handoff = Handoff(2)
    try:
        assert await handoff.run(os.sched_getscheduler, 0).future == os.SCHED_BATCH
        assert os.sched_getscheduler(0) != os.SCHED_BATCH
    finally:
        handoff.shutdown()


async def test_the_loop_yields_to_the_threads_once_calls_pile_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Results must not come back in unbounded bursts: with `_YIELD_AT` calls waiting,
    the loop's next pass gives the threads the CPU."""
    yields: list[int] = []
    monkeypatch.setattr(handoff_module, "_sched_yield", lambda: yields.append(1))
    handoff = Handoff(1)
    release = threading.Event()
    try:
        busy = handoff.run(release.wait, 5)  # the one thread is taken
        await asyncio.sleep(0.05)
        few = [handoff.run(int, "1") for _ in range(handoff_module._YIELD_AT - 1)]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert yields == []  # fewer waiting: the threads get the CPU when the loop blocks
        more = handoff.run(int, "2")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert yields == [1]
        release.set()
        assert await asyncio.wait_for(asyncio.gather(busy.future, more.future,
                                                     *(j.future for j in few)), 5)
    finally:
        handoff.shutdown()
