"""`--loop auto|asyncio|uvloop`: what each choice runs on, and a clear refusal when the
loop asked for is not installed."""

from __future__ import annotations

import asyncio

import pytest

from tensorwire.ops import loops
from tensorwire.settings import Settings

uvloop = pytest.importorskip("uvloop")


def _loop_type(choice: str) -> type:
    async def running() -> type:
        return type(asyncio.get_running_loop())

    return loops.run(running(), choice)


def test_asyncio_runs_on_asyncios_own_loop() -> None:
    assert not issubclass(_loop_type("asyncio"), uvloop.Loop)


def test_uvloop_runs_on_uvloop() -> None:
    assert issubclass(_loop_type("uvloop"), uvloop.Loop)


def test_auto_takes_uvloop_when_it_is_installed() -> None:
    assert loops.resolve("auto") == "uvloop"
    assert issubclass(_loop_type("auto"), uvloop.Loop)


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "uvloop_installed", lambda: False)
    assert loops.resolve("auto") == "asyncio"
    assert not issubclass(_loop_type("auto"), uvloop.Loop)


def test_uvloop_without_uvloop_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loops, "uvloop_installed", lambda: False)

    async def never() -> None:  # pragma: no cover - must not run
        raise AssertionError("ran without the loop it asked for")

    with pytest.raises(loops.LoopUnavailable, match=r"tensorwire\[uvloop\]"):
        loops.run(never(), "uvloop")


def test_an_unknown_loop_is_refused_by_the_settings() -> None:
    with pytest.raises(ValueError, match="loop must be one of auto, asyncio, uvloop"):
        Settings(loop="trio").validate()


def test_run_returns_what_the_coroutine_returns() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    for choice in loops.LOOPS:
        assert loops.run(answer(), choice) == 42
