"""Running an `async def` method's first step at once, as Python 3.12's eager tasks do.

Most `async def` model methods never suspend (they compute and return), and a method
that does not suspend cannot be cut short by a time limit anyway: a limit cancels a
task at an `await`, and there is none. A compiled handler therefore takes the method's
first step itself (`coro.send(None)`). When the method finishes within it, the result is
there with no time limit registered and no coroutine awaited (on the running server that
was a tenth of what tensorwire added to a small request over bare aiohttp). When it
suspends, `resumed` hands the rest to the caller's `await`, under the time limit as
before, so a method that waits is bounded exactly as it always was.

    finished, value = first_step(method(**kwargs))
    result = value if finished else await deadlines.run(limit, value)
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any


def first_step(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Take `coro`'s first step: (True, its result) when it finished in it, else (False,
    the rest to await). What `coro` raises in the step propagates (for an async
    generator's `__anext__()`, StopAsyncIteration at its end)."""
    try:
        return False, resumed(coro, coro.send(None))
    except StopIteration as done:
        return True, done.value


@types.coroutine
def resumed(coro: Coroutine[Any, Any, Any], first: Any) -> Generator[Any, Any, Any]:
    """The rest of `coro`, whose first step was taken and yielded `first`: awaiting it
    passes `first` up to the task and drives `coro` to its end, as `await coro` would
    have from the start (values sent, exceptions thrown and closing go to `coro`)."""
    value = first
    while True:
        try:
            sent = yield value
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation (or a throw) goes to the method
            try:
                value = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                value = coro.send(sent)
            except StopIteration as done:
                return done.value
