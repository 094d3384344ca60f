"""Running a service's methods: one instance per worker, shared by both transports.

`def` methods run in a thread pool so they never block the event loop; `async def`
methods run on it. Generators are driven chunk by chunk, each `next()` in the pool, so
a slow producer streams as it produces. The transports hand in validated arguments and
get back Python values; nothing here knows about HTTP or gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .context import Context
from .errors import ServiceUnavailable
from .sdk import ServiceSpec
from .settings import Settings
from .spec import APISpec

log = logging.getLogger("tensorwire.runtime")
_DONE = object()


class ServiceRuntime:
    """The live service: its instance, executor and readiness."""

    def __init__(self, spec: ServiceSpec, settings: Settings | None = None) -> None:
        self.spec = spec
        self.settings = settings or Settings()
        self.executor = ThreadPoolExecutor(max_workers=self.settings.threads,
                                           thread_name_prefix="tensorwire-api")
        self.instance: Any = None
        self.ready = False
        self.draining = False
        self._methods: dict[str, Callable[..., Any]] = {}
        self._callers: dict[str, Callable[[dict[str, Any], Context], tuple[tuple, dict]]] = {}

    async def start(self) -> None:
        """Instantiate the service class (model loading) off the event loop."""
        loop = asyncio.get_running_loop()
        self.instance = await loop.run_in_executor(self.executor, self.spec.cls)
        for api in self.spec.apis.values():
            self._methods[api.name] = api.bind(self.instance)
            self._callers[api.name] = _argument_layout(api)
        self.ready = True

    async def close(self) -> None:
        self.ready = False
        closer = getattr(self.instance, "__tensorwire_close__", None) or getattr(
            self.instance, "close", None) if self.instance is not None else None
        if callable(closer):
            with contextlib.suppress(Exception):
                result = closer()
                if asyncio.iscoroutine(result):
                    await result
        self.executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ calls
    def _prepare(self, api: APISpec, kwargs: dict[str, Any], ctx: Context):
        if not self.ready:
            raise ServiceUnavailable("the service is not ready")
        method = self._methods[api.name]
        args, kw = self._callers[api.name](kwargs, ctx)
        return method, args, kw

    async def call(self, api: APISpec, kwargs: dict[str, Any], ctx: Context) -> Any:
        """Run a unary API and return its (host-side) result."""
        method, args, kw = self._prepare(api, kwargs, ctx)
        if api.is_async:
            result = await method(*args, **kw)
        else:
            loop = asyncio.get_running_loop()
            try:
                result = await loop.run_in_executor(
                    self.executor, functools.partial(method, *args, **kw))
            except asyncio.CancelledError:
                ctx.cancel()  # the thread runs on; a method may poll ctx.cancelled
                raise
        if not api.output.codec.has_tensors:  # no device tensors: skip a coroutine
            return result
        return await self.to_host(api, result)

    async def stream(self, api: APISpec, kwargs: dict[str, Any], ctx: Context
                     ) -> AsyncIterator[Any]:
        """Run a generator API, yielding each chunk as soon as it is produced."""
        method, args, kw = self._prepare(api, kwargs, ctx)
        if api.is_async:
            agen = method(*args, **kw)
            try:
                async for chunk in agen:
                    yield await self.to_host(api, chunk)
            finally:
                ctx.cancel()
                with contextlib.suppress(Exception):
                    await agen.aclose()
            return
        loop = asyncio.get_running_loop()
        gen = method(*args, **kw)
        try:
            while True:
                chunk = await loop.run_in_executor(self.executor, next, gen, _DONE)
                if chunk is _DONE:
                    break
                yield await self.to_host(api, chunk)
        finally:
            ctx.cancel()
            with contextlib.suppress(Exception):
                await loop.run_in_executor(self.executor, gen.close)

    async def to_host(self, api: APISpec, value: Any) -> Any:
        """Move every device tensor of an output to the host in one batched transfer."""
        codec = api.output.codec
        if not codec.has_tensors:
            return value
        tensors = codec.iter_tensors(value)
        if not tensors:
            return value
        from .codecs import transfer

        return transfer.outputs_to_host(value, tensors, codec)


def _argument_layout(api: APISpec) -> Callable[[dict[str, Any], Context], tuple[tuple, dict]]:
    """How validated arguments map onto the method's parameters, decided once."""
    ctx_name = api.context_param
    if api.is_root:
        root = api.root_field.name
        if ctx_name is None:
            return lambda kwargs, ctx: ((kwargs[root],), {})
        if api.context_positional:
            return lambda kwargs, ctx: ((kwargs[root], ctx), {})
        return lambda kwargs, ctx: ((kwargs[root],), {ctx_name: ctx})
    if ctx_name is None:
        return lambda kwargs, ctx: ((), kwargs)
    if api.context_positional:
        return lambda kwargs, ctx: ((ctx,), kwargs)

    def with_context(kwargs: dict[str, Any], ctx: Context) -> tuple[tuple, dict]:
        kwargs[ctx_name] = ctx
        return (), kwargs

    return with_context
