"""`self.model`: a dependency's APIs as methods, called as BentoML's are.

    self.model.classify(x=arr)                    # the callee's own kind: a `def` API
                                                  # answers, an `async def` one is awaited
    await self.model.to_async.classify(x=arr)     # always awaitable (async callers)
    self.model.to_sync.classify(x=arr)            # always blocking (`def` callers)
    for chunk in self.model.to_sync.generate(...)           # a streaming API
    async for chunk in self.model.to_async.generate(...)

A handle does not know where its dependency runs: its `Backend` (`LocalBackend`:
through the dependency's request plans in this process; `RemoteBackend`: over the
client) answers every call as a coroutine or an async iterator on the server's event
loop; the blocking forms hand them to that loop from the method's worker thread
(`bridge`). A dependency known only by its URL has no declared kinds: its natural form
follows where it is called (awaitable on the event loop, blocking in a worker thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from . import bridge
from .calls import Backend, Target


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class Deferred:
    """A call of an API whose kind is not known yet (a URL-only dependency): awaiting
    it gives the result (a streaming API: its chunks' async iterator), `async for`
    iterates a streaming API's chunks."""

    def __init__(self, target: Target, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._target = target
        self._args = args
        self._kwargs = kwargs

    async def _result(self) -> Any:
        target = self._target
        if await target.kind():
            return target.chunks(self._args, self._kwargs)
        return await target.call(self._args, self._kwargs)

    def __await__(self) -> Generator[Any, None, Any]:
        return self._result().__await__()

    async def __aiter__(self) -> AsyncIterator[Any]:
        target = self._target
        if not await target.kind():
            raise TypeError(f"{target.where} does not stream: await it")
        async for chunk in target.chunks(self._args, self._kwargs):
            yield chunk


def _async_form(target: Target, loop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    if target.stream is None:
        return lambda *args, **kwargs: Deferred(target, args, kwargs)
    if target.stream:
        def chunks(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            if _on_loop(loop):
                return target.chunks(args, kwargs)
            return bridge.chunks_elsewhere(loop, lambda: target.chunks(args, kwargs))

        return chunks

    def call(*args: Any, **kwargs: Any) -> Any:
        if _on_loop(loop):
            return target.call(args, kwargs)
        return bridge.elsewhere(loop, target.call(args, kwargs))

    return call


def _sync_form(target: Target, loop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    where = target.where

    def chunks(*args: Any, **kwargs: Any) -> bridge.SyncChunks:
        return bridge.SyncChunks(loop, lambda: target.chunks(args, kwargs), where)

    def call(*args: Any, **kwargs: Any) -> Any:
        return bridge.call(loop, target.call(args, kwargs), where)

    if target.stream is None:
        def either(*args: Any, **kwargs: Any) -> Any:
            if bridge.call(loop, target.kind(), where):
                return chunks(*args, **kwargs)
            return call(*args, **kwargs)

        return either
    return chunks if target.stream else call


def _natural_form(target: Target, loop: asyncio.AbstractEventLoop) -> Callable[..., Any]:
    """BentoML's `self.dep.api(...)`: the callee method's own kind."""
    if target.is_async is None:
        forms = (_async_form(target, loop), _sync_form(target, loop))
        return lambda *args, **kwargs: forms[0 if _on_loop(loop) else 1](*args, **kwargs)
    if target.is_async:
        return _async_form(target, loop)
    return _sync_form(target, loop)


class _View:
    """`handle.to_async` / `handle.to_sync`: every API in one form."""

    def __init__(self, handle: ServiceHandle, form: Callable[[Target], Callable[..., Any]]
                 ) -> None:
        self._handle = handle
        self._form = form

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = self._form(self._handle._backend.api(name))
        self.__dict__[name] = method  # made once per API
        return method

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._handle._backend.names()})


class ServiceHandle:
    """What `self.<dependency>` is once placed (see the module docstring)."""

    def __init__(self, backend: Backend, loop: asyncio.AbstractEventLoop) -> None:
        self._backend = backend
        self._loop = loop
        #: Every API awaitable (or an async iterator of chunks).
        self.to_async = _View(self, lambda target: _async_form(target, loop))
        #: Every API blocking (or an iterator of chunks), for `def` methods.
        self.to_sync = _View(self, lambda target: _sync_form(target, loop))

    @property
    def backend(self) -> Backend:
        return self._backend

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = _natural_form(self._backend.api(name), self._loop)
        self.__dict__[name] = method
        return method

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *self._backend.names()})

    def __repr__(self) -> str:
        return f"<dependency {self._backend.name} ({type(self._backend).__name__})>"
