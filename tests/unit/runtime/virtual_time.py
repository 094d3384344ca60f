"""An asyncio event loop on a virtual clock, for timing-sensitive runtime tests.

The clock stands still while callbacks are ready and jumps straight to the next timer
when none are: `asyncio.sleep(0.002)` takes no wall time, and a scenario of thousands
of requests arriving 0.25 ms apart runs in a blink, the same way every time, whatever
else the machine is doing. Only the selector is wrapped (as aiotools' VirtualClock
does): a test must not wait on real sockets or threads.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector loop whose `time()` only moves when it would otherwise sleep."""

    def __init__(self) -> None:
        super().__init__(selectors.SelectSelector())
        self._virtual_now = 0.0
        real_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[Any]:
            if timeout is not None and timeout > 0:
                self._virtual_now += timeout  # the sleep happens on the virtual clock
            return real_select(0)

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._virtual_now


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()
