"""Running a service's methods: one instance per worker, shared by both transports.

`def` methods run in a thread pool so they never block the event loop; `async def`
methods run on it. Generators are driven chunk by chunk, each `next()` in the pool, so
a slow producer streams as it produces. The transports hand in validated arguments and
get back Python values; nothing here knows about HTTP or gRPC.

The per-request time limit lives here, once for both transports: `request_timeout`
bounds a unary call (or, for a stream, the wait for each chunk), tightened by the
client's own deadline when the transport passes one; past it the call fails with
DeadlineExceeded (504 / DEADLINE_EXCEEDED) and `ctx.cancelled` turns true.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..codecs import transfer
from ..context import Context
from ..contract.descriptor import APISpec, ServiceSpec
from ..errors import DeadlineExceeded, ServiceUnavailable
from ..settings import Settings
from ..telemetry import metrics
from ..telemetry.tracing import Tracing
from ..tempdirs import TempDirs
from .admission import Admission
from .batching import Batcher
from .deadlines import Deadlines, Expired
from .handoff import Handoff
from .streams import Stream

log = logging.getLogger("tensorwire.runtime")
_DONE = object()


class InitFailure(Exception):
    """The service class's `__init__` raised (a missing weights file, a bad config...).

    Raised by `ServiceRuntime.start` with the user's exception as `__cause__`, so that
    start-up can show its full traceback under one line naming the service and the
    phase, instead of mistaking, say, a FileNotFoundError for a port that did not bind.
    """

    phase = "__init__"

    def __init__(self, service: str, cls: type, cause: BaseException) -> None:
        self.service = service
        super().__init__(f"service {service} failed in {cls.__qualname__}.__init__: "
                         f"{type(cause).__name__}: {cause}")


class ServiceRuntime:
    """The live service: its instance, executor and readiness."""

    def __init__(self, spec: ServiceSpec, settings: Settings | None = None) -> None:
        self.spec = spec
        self.settings = settings or Settings()
        #: The threads `def` methods (and generators, device transfers) run on.
        self.handoff = Handoff(self.settings.threads)
        #: Per-request temp directories (Context.temp_dir) of this worker.
        self.temp_dirs = TempDirs(self.settings.extra.get("temp_dir"))  # type: ignore[arg-type]
        self.instance: Any = None
        self.ready = False
        #: The gate both transports pass: drain state, concurrency, metrics, access log.
        self.admission = Admission(self.settings)
        self._methods: dict[str, Callable[..., Any]] = {}
        self._callers: dict[str, Callable[[dict[str, Any], Context], tuple[tuple, dict]]] = {}
        self._batchers: dict[str, Any] = {}
        self._deadlines = Deadlines()
        #: OpenTelemetry spans of requests; None (and nothing imported) when off.
        self.tracing = Tracing.from_settings(self.settings, spec.name, self.admission.routes)
        if self.tracing is not None:
            self.admission.trace_id = self.tracing.trace_id

    async def start(self) -> None:
        """Instantiate the service class (model loading) off the event loop."""
        try:
            self.instance = await self.handoff.run(self.spec.cls).future
        except Exception as exc:
            raise InitFailure(self.spec.name, self.spec.cls, exc) from exc
        for api in self.spec.apis.values():
            self._methods[api.name] = api.bind(self.instance)
            self._callers[api.name] = _argument_layout(api)
            if api.batchable:
                self._batchers[api.name] = self._batcher(api)
        self.ready = True

    def _batcher(self, api: APISpec) -> Any:
        method = self._methods[api.name]
        layout = self._callers[api.name]

        async def invoke(values: dict[str, Any]) -> Any:
            args, kw = layout(values, None)  # type: ignore[arg-type]
            if api.is_async:
                return await method(*args, **kw)
            return await self.handoff.run(functools.partial(method, *args, **kw)).future

        async def to_host(value: Any) -> Any:
            return await self.to_host(api, value)

        observe = self.settings.extra.get("batch_observer")
        if observe is None and self.settings.metrics:
            observe = metrics.batch_observer(api.name)
        return Batcher(api, invoke, to_host,
                       max_queue_items=self.settings.batch_queue_items or None,
                       observe=observe, tracing=self.tracing)  # type: ignore[arg-type]

    def batcher(self, name: str) -> Any:
        """The dispatcher of a batchable API (tests and metrics inspect it)."""
        return self._batchers[name]

    async def close(self) -> None:
        self.ready = False
        for batcher in self._batchers.values():
            await batcher.close()
        closer = getattr(self.instance, "__tensorwire_close__", None) or getattr(
            self.instance, "close", None) if self.instance is not None else None
        if callable(closer):
            with contextlib.suppress(Exception):
                result = closer()
                if asyncio.iscoroutine(result):
                    await result
        self.handoff.shutdown()
        self.temp_dirs.close()

    def context(self, request: Any) -> Context:
        """A new request's Context, drawing its temp dir from this worker's pool."""
        return Context(request, temp_dirs=self.temp_dirs, limits=self.settings.extra)

    @property
    def draining(self) -> bool:
        return self.admission.draining

    # ------------------------------------------------------------------ calls
    def limit_for(self, deadline: float | None) -> float | None:
        """The seconds this call may take: the server's limit or the client's deadline."""
        limit = self.admission.timeout
        if deadline is not None and (limit is None or deadline < limit):
            return max(deadline, 0.0)
        return limit

    def _prepare(self, api: APISpec, kwargs: dict[str, Any], ctx: Context | None):
        if not self.ready:
            raise ServiceUnavailable("the service is not ready")
        method = self._methods[api.name]
        args, kw = self._callers[api.name](kwargs, ctx)
        return method, args, kw

    def direct(self, api: APISpec) -> Callable[[dict[str, Any]], Awaitable[Any]] | None:
        """The call of a unary API with nothing around it, for a handler compiled per
        API: validated arguments in, an awaitable of the host-side result out.

        None when the call needs a request's `Context` (the method declares one) or
        per-call bookkeeping (tracing, device outputs outside a batch): the transport
        then takes the general path, `call`. The time limit stays the caller's (see
        `Deadlines.enter`), so that it costs no coroutine frame. Call it after `start`.
        """
        if (api.output.stream or api.context_param is not None or self.tracing is not None
                or not self.ready):
            return None
        if api.batchable:
            return self._batchers[api.name].submit
        if api.output.codec.has_tensors:
            return None
        method = self._methods[api.name]
        run = self.handoff.run
        # the thread's job needs no cleanup when the caller stops waiting: without a
        # Context there is no temp dir to keep until it returns
        if api.is_root:  # the one input is positional (it may be positional-only)
            root = api.root_field.name
            if api.is_async:
                return lambda kwargs: method(kwargs[root])
            return lambda kwargs: run(functools.partial(method, kwargs[root])).future
        if api.is_async:
            return lambda kwargs: method(**kwargs)
        return lambda kwargs: run(functools.partial(method, **kwargs)).future

    @property
    def deadlines(self) -> Deadlines:
        """The per-request time limits of this worker's loop (compiled handlers)."""
        return self._deadlines

    def timed_out(self, limit: float, ctx: Context | None = None) -> DeadlineExceeded:
        """The error of a call that ran past `limit` seconds (cancelling `ctx`)."""
        if ctx is not None:
            ctx.cancel()  # a sync method still running may poll ctx.cancelled and stop
        return DeadlineExceeded(f"the request did not complete within {limit:g} s")

    async def call(self, api: APISpec, kwargs: dict[str, Any], ctx: Context,
                   deadline: float | None = None) -> Any:
        """Run a unary API and return its (host-side) result.

        `deadline`: seconds the client still waits (gRPC), None when it did not say.
        """
        limit = self.limit_for(deadline)
        if api.is_async and not api.batchable and not api.output.codec.has_tensors:
            # The method's own coroutine, unwrapped: nothing to do after it returns.
            method, args, kw = self._prepare(api, kwargs, ctx)
            work = method(*args, **kw)
        else:
            work = self._call(api, kwargs, ctx)
        if self.tracing is not None and not api.batchable:  # a batch traces its own call
            work = self.tracing.model_call(work)
        if limit is None:
            return await work
        try:
            return await self._deadlines.run(limit, work)
        except Expired:
            raise self.timed_out(limit, ctx) from None

    async def _call(self, api: APISpec, kwargs: dict[str, Any], ctx: Context) -> Any:
        if api.batchable:
            if not self.ready:
                raise ServiceUnavailable("the service is not ready")
            return await self._batchers[api.name].submit(kwargs)
        method, args, kw = self._prepare(api, kwargs, ctx)
        if api.is_async:
            result = await method(*args, **kw)
        else:
            call = functools.partial(method, *args, **kw)
            if self.tracing is not None:  # the method's own spans nest under the request
                call = self.tracing.in_context(call)
            job = self.handoff.run(call)
            try:
                result = await job.future
            except asyncio.CancelledError:
                ctx.cancel()  # the thread runs on; a method may poll ctx.cancelled
                ctx.close_after(job)  # and its temp files stay until it returns
                raise
        if not api.output.codec.has_tensors:  # no device tensors: skip a coroutine
            return result
        return await self.to_host(api, result)

    def open_stream(self, api: APISpec, kwargs: dict[str, Any], ctx: Context | None
                    ) -> Stream:
        """Start a generator API's call, for a transport to iterate (see `streams`).

        The time limit applies to each chunk's production, not to the whole stream: a
        long generation that keeps producing is never cut. `ctx` is None only for an API
        that declares no Context (a compiled handler's call).
        """
        method, args, kw = self._prepare(api, kwargs, ctx)
        limit = self.admission.timeout
        gen = method(*args, **kw)  # before the limit is registered: it may raise
        # One time-limit entry for the whole stream (`Deadlines.watch`): a chunk costs
        # two attribute writes on it, read by the sweeper, and no clock, timer or
        # awaitable of its own; the transport's time with a chunk never counts.
        watch = self._deadlines.watch(limit) if limit is not None else None
        if not api.is_async:
            chunks = self._steps_in_pool(api, gen)
        elif api.output.codec.has_tensors:
            chunks = self._on_host(api, gen)
        else:
            chunks = gen  # the method's own generator: no layer between it and the write
        return Stream(chunks, gen, watch,
                      lambda: self.timed_out(limit, ctx),  # type: ignore[arg-type]
                      ctx)

    async def stream(self, api: APISpec, kwargs: dict[str, Any], ctx: Context | None
                     ) -> AsyncIterator[Any]:
        """`open_stream` as an async generator, for a transport that passes the chunks
        on by yielding them (grpc.aio)."""
        stream = self.open_stream(api, kwargs, ctx)
        mark = stream.mark
        try:
            async for chunk in stream.chunks:
                mark.made += 1
                mark.holding = True
                yield chunk
                mark.holding = False
        except asyncio.CancelledError:
            stream.check()
            raise
        finally:
            await stream.aclose()

    async def _steps_in_pool(self, api: APISpec, gen: Any) -> AsyncIterator[Any]:
        """A `def` generator's chunks, each `next()` in the pool; closed in the pool too,
        only once a step still running has returned."""
        on_device = api.output.codec.has_tensors
        job = None
        try:
            while True:
                job = self.handoff.run(next, gen, _DONE)
                chunk = await job.future
                if chunk is _DONE:
                    return
                yield await self.to_host(api, chunk) if on_device else chunk
        finally:
            with contextlib.suppress(Exception):
                if job is not None:
                    await self.handoff.finished(job)
                await self.handoff.run(gen.close).future

    async def _on_host(self, api: APISpec, gen: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """An async generator's chunks with their device tensors copied to the host."""
        async for chunk in gen:
            yield await self.to_host(api, chunk)

    async def to_host(self, api: APISpec, value: Any) -> Any:
        """Move every device tensor of an output to the host in one batched transfer.

        The copies end in a device synchronisation, so they run in the thread pool,
        never on the event loop; an output without device tensors returns at once.
        """
        codec = api.output.codec
        if not codec.has_tensors:
            return value
        tensors = codec.iter_tensors(value)
        if not tensors:
            return value
        return await self.handoff.run(transfer.outputs_to_host, value, tensors).future


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
