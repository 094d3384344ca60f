"""The event loop a server runs on: `--loop auto|asyncio|uvloop`.

uvloop (libuv under asyncio's API) makes the loop's own work cheaper: socket reads and
writes, callbacks, timers. Both stacks tensorwire serves on run on it: aiohttp through the
loop's public API, grpc.aio by polling its completion queue from the loop. As uvicorn
does, `auto` takes uvloop when it is installed (`pip install tensorwire[uvloop]`) and
asyncio's own loop otherwise; naming `uvloop` without it installed is a usage error, not
a silent fallback, so that a deployment gets the loop it asked for.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..settings import LOOPS

T = TypeVar("T")


class LoopUnavailable(RuntimeError):
    """The loop asked for cannot be made here (uvloop is not installed)."""


def uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def resolve(choice: str) -> str:
    """The loop `choice` names here: `auto` becomes uvloop or asyncio."""
    if choice not in LOOPS:
        raise ValueError(f"loop must be one of {', '.join(LOOPS)}, not {choice!r}")
    if choice == "auto":
        return "uvloop" if uvloop_installed() else "asyncio"
    if choice == "uvloop" and not uvloop_installed():
        raise LoopUnavailable("--loop uvloop needs uvloop: pip install 'tensorwire[uvloop]' "
                              "(or --loop auto to take it only when it is installed)")
    return choice


def factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a new loop of `choice` (raises `LoopUnavailable` as `resolve` does)."""
    if resolve(choice) == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_loop(choice: str) -> asyncio.AbstractEventLoop:
    return factory(choice)()


def running() -> str:
    """The kind of loop running now: "uvloop" or "asyncio" (for the start-up line)."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"


def run(main: Coroutine[Any, Any, T], choice: str) -> T:
    """`asyncio.run(main)` on a loop of `choice`."""
    try:
        make = factory(choice)
    except BaseException:
        main.close()  # never awaited: close it so that no warning says so
        raise
    with asyncio.Runner(loop_factory=make) as runner:
        return runner.run(main)
