"""A coroutine's first step taken at once, the rest awaited (`tensorwire.runtime.eager`):
the rest must behave exactly as awaiting the coroutine from the start would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from tensorwire.runtime.deadlines import Deadlines, Expired
from tensorwire.runtime.eager import first_step


async def returns_at_once(x: int) -> int:
    return x * 2


async def suspends(x: int, times: int) -> int:
    for _ in range(times):
        await asyncio.sleep(0)
    fut = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(fut.set_result, x)
    return await fut + 1


def test_a_method_that_does_not_suspend_is_done_in_the_first_step():
    assert first_step(returns_at_once(21)) == (True, 42)


def test_the_rest_of_a_suspending_method_gives_its_result():
    async def scenario() -> int:
        done, rest = first_step(suspends(41, 3))
        assert not done
        return await rest

    assert asyncio.run(scenario()) == 42


def test_an_error_after_suspending_reaches_the_awaiter():
    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("bad input")

    async def scenario() -> None:
        _, rest = first_step(fails())
        await rest

    with pytest.raises(ValueError, match="bad input"):
        asyncio.run(scenario())


def test_a_cancel_goes_into_the_method_which_may_clean_up():
    seen: list[str] = []

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        finally:
            seen.append("cleanup")

    async def scenario() -> None:
        _, rest = first_step(slow())
        task = asyncio.ensure_future(rest)
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert seen == ["cancelled", "cleanup"]


def test_the_time_limit_still_bounds_the_rest():
    async def scenario() -> None:
        deadlines = Deadlines()
        _, rest = first_step(suspends_forever())
        with pytest.raises(Expired):
            await deadlines.run(0.05, rest)
        assert deadlines.pending == 0

    async def suspends_forever() -> None:
        await asyncio.sleep(30)

    asyncio.run(scenario())


def test_closing_the_rest_closes_the_method():
    closed: list[bool] = []

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            closed.append(True)

    async def scenario() -> None:
        _, rest = first_step(waits())
        rest.close()

    asyncio.run(scenario())
    assert closed == [True]


def test_a_stream_is_bounded_per_chunk_made_and_never_for_its_consumer_s_time():
    """A stream (`RequestPlan.open`) under a 0.2 s limit: chunks made at once or after a short
    wait pass, a consumer slower than the limit is never cut, a chunk whose making
    waits past the limit fails the stream, and nothing stays registered."""
    import tensorwire
    from tensorwire.errors import DeadlineExceeded
    from tensorwire.runtime.service import ServiceRuntime
    from tensorwire.settings import Settings

    @tensorwire.service
    class Streams:
        @tensorwire.api
        async def quick(self, n: int) -> AsyncIterator[int]:
            for i in range(n):
                yield i

        @tensorwire.api
        async def mixed(self, pause: float) -> AsyncIterator[int]:
            yield 0
            await asyncio.sleep(pause)
            yield 1
            raise ValueError("after the chunks")

        @tensorwire.api
        def waits(self, pause: float) -> Iterator[int]:
            yield 0
            time.sleep(pause)
            yield 1

    async def scenario() -> None:
        runtime = ServiceRuntime(tensorwire.get_service_spec(Streams),
                                 Settings(request_timeout=0.2))
        await runtime.start()
        try:
            assert [c async for c in _chunks(runtime, "quick", {"n": 5})] == [
                0, 1, 2, 3, 4]
            slow: list[int] = []
            async for c in _chunks(runtime, "quick", {"n": 3}):
                slow.append(c)
                await asyncio.sleep(0.3)  # the consumer's time: past the limit each chunk
            assert slow == [0, 1, 2]
            got: list[int] = []
            with pytest.raises(ValueError, match="after the chunks"):
                async for c in _chunks(runtime, "mixed", {"pause": 0.01}):
                    got.append(c)
            assert got == [0, 1]
            got.clear()
            with pytest.raises(DeadlineExceeded):
                async for c in _chunks(runtime, "mixed", {"pause": 2.0}):
                    got.append(c)
            assert got == [0]
            got.clear()
            with pytest.raises(DeadlineExceeded):  # a def generator's step in its thread
                async for c in _chunks(runtime, "waits", {"pause": 1.0}):
                    got.append(c)
            assert got == [0]
            assert runtime.deadlines.pending == 0
        finally:
            await runtime.close()

    asyncio.run(scenario())


async def _chunks(runtime: Any, name: str, kwargs: dict[str, Any]
                  ) -> AsyncIterator[Any]:
    """A stream's chunks as a transport takes them (the loop of `runtime.streams`)."""
    stream = runtime.plan(name).open(kwargs, None)
    mark = stream.mark
    try:
        async for chunk in stream.chunks:
            mark.made += 1
            mark.holding = True  # the consumer's time is not the stream's
            yield chunk
            mark.holding = False
    except asyncio.CancelledError:
        stream.check()
        raise
    finally:
        await stream.aclose()
