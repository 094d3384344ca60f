"""The one-sweeper request deadlines: expiry, early finish, foreign cancels, cleanup."""

from __future__ import annotations

import asyncio

import pytest

from tensorwire.runtime.deadlines import Deadlines, Expired


async def test_work_past_its_limit_is_cancelled_and_reported_expired() -> None:
    deadlines = Deadlines()
    stopped = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            stopped.set()

    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(Expired):
        await deadlines.run(0.05, slow())
    took = loop.time() - start
    assert stopped.is_set()  # the work itself was cancelled, not left running
    assert 0.05 <= took < 1.0
    assert deadlines.pending == 0
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_work_within_its_limit_returns_its_value_and_leaves_nothing() -> None:
    deadlines = Deadlines()

    async def quick() -> int:
        await asyncio.sleep(0)
        return 42

    results = await asyncio.gather(*(deadlines.run(5.0, quick()) for _ in range(100)))
    assert results == [42] * 100
    assert deadlines.pending == 0


async def test_only_the_late_requests_expire_among_concurrent_ones() -> None:
    deadlines = Deadlines()

    async def sleep_then(value: float) -> float:
        await asyncio.sleep(value)
        return value

    async def one(limit: float, cost: float) -> str:
        try:
            await deadlines.run(limit, sleep_then(cost))
            return "ok"
        except Expired:
            return "expired"

    outcomes = await asyncio.gather(one(1.0, 0.01), one(0.05, 2.0), one(1.0, 0.1),
                                    one(0.02, 5.0))
    assert outcomes == ["ok", "expired", "ok", "expired"]
    assert deadlines.pending == 0


async def test_a_cancel_from_elsewhere_stays_a_cancel_not_an_expiry() -> None:
    deadlines = Deadlines()
    started = asyncio.Event()

    async def wait_forever() -> None:
        started.set()
        await asyncio.sleep(10)

    task = asyncio.create_task(deadlines.run(5.0, wait_forever()))
    await started.wait()
    task.cancel()  # e.g. the client hung up
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deadlines.pending == 0


async def test_errors_of_the_work_pass_through_unchanged() -> None:
    deadlines = Deadlines()

    async def fail() -> None:
        raise ValueError("model broke")

    with pytest.raises(ValueError, match="model broke"):
        await deadlines.run(1.0, fail())
    assert deadlines.pending == 0


async def test_a_shorter_limit_arriving_later_still_fires_on_time() -> None:
    deadlines = Deadlines()

    async def long_one() -> None:
        await deadlines.run(30.0, asyncio.sleep(0.5))

    background = asyncio.create_task(long_one())  # starts the sweeper with a coarse tick
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(Expired):
        await deadlines.run(0.03, asyncio.sleep(10))
    assert loop.time() - start < 0.25  # not held to the 30 s limit's 50 ms tick
    await background


async def _chunk(watch, seconds: float) -> str:
    """One chunk made under the watch, as ServiceRuntime.stream makes it."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        watch.check()
        raise
    watch.made += 1
    return "chunk"


async def _hold(watch, seconds: float) -> None:
    """The consumer's time with a chunk (writing it to a slow client)."""
    watch.holding = True
    await asyncio.sleep(seconds)
    watch.holding = False


async def test_a_stream_watch_limits_each_chunk_not_the_gaps_between_them() -> None:
    deadlines = Deadlines()
    watch = deadlines.watch(0.1)
    try:
        assert deadlines.pending == 1  # one entry for the whole stream
        for _ in range(3):
            assert await _chunk(watch, 0.02) == "chunk"
            await _hold(watch, 0.15)  # the consumer writing: longer than the limit
        for _ in range(10):  # chunks back to back: 0.5 s in all, each well in its limit
            assert await _chunk(watch, 0.05) == "chunk"
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(Expired):
            await _chunk(watch, 5.0)
        # never before the limit (three 5 ms ticks after it at most, on an idle loop)
        assert 0.1 <= loop.time() - start < 0.5
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    finally:
        watch.close()
    assert deadlines.pending == 0


async def test_a_chunk_that_comes_although_the_limit_fired_is_taken_back() -> None:
    """A generator that swallows the limit's cancel and yields after all: the cancel is
    taken back (the task's count restored) and the stream is watched as before."""
    deadlines = Deadlines()
    watch = deadlines.watch(0.05)
    try:
        try:
            await asyncio.sleep(1.0)
        except asyncio.CancelledError:
            pass  # swallowed, as a careless generator does
        assert watch.expired
        watch.made += 1
        await asyncio.sleep(0.03)  # the next sweep sees the chunk
        assert not watch.expired
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
        with pytest.raises(Expired):
            await _chunk(watch, 5.0)
    finally:
        watch.close()


async def test_a_cancel_from_elsewhere_during_a_chunk_stays_a_cancel() -> None:
    deadlines = Deadlines()

    async def stream() -> None:
        watch = deadlines.watch(5.0)
        try:
            while True:
                await _chunk(watch, 0.01)
        finally:
            watch.close()

    task = asyncio.create_task(stream())
    await asyncio.sleep(0.05)
    task.cancel()  # the client hung up
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deadlines.pending == 0
