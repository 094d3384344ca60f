"""A coroutine's first step taken at once, the rest awaited (`tensorwire.runtime.eager`):
the rest must behave exactly as awaiting the coroutine from the start would."""

from __future__ import annotations

import asyncio

import pytest

from tensorwire.runtime.deadlines import Deadlines, Expired
from tensorwire.runtime.eager import resumed


def first_step(coro):
    """(True, result) when `coro` finished in its first step, else (False, the rest)."""
    try:
        return False, resumed(coro, coro.send(None))
    except StopIteration as done:
        return True, done.value


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
