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
from collections.abc import AsyncIterator, Callable
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
from .chunk_stream import Stream
from .deadlines import Deadlines, Expired
from .handoff import Handoff
from .plan import RequestPlan

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
    """The live service: its instance, executor and readiness.

    On a server with several services each has its own runtime (instance, threads,
    batchers, time limit) and they share the server's `admission` and `tracing`; the
    request `plans` of its APIs (`RequestPlan`) may be given, to outlive it (a service
    unloaded and loaded again binds the same plans to a new runtime). `names` maps an
    API's name to the name its metrics carry (the v2 model's: `iris.predict` under a
    prefix).
    """

    def __init__(self, spec: ServiceSpec, settings: Settings | None = None, *,
                 admission: Admission | None = None, tracing: Tracing | bool | None = True,
                 plans: dict[str, RequestPlan] | None = None,
                 names: Callable[[str], str] | None = None) -> None:
        self.spec = spec
        self.settings = settings or Settings()
        #: Seconds an API method may run (None: no limit): this service's setting.
        self.timeout: float | None = self.settings.request_timeout or None
        self.public: Callable[[str], str] = names or (lambda name: name)
        #: The threads `def` methods (and generators, device transfers) run on.
        self.handoff = Handoff(self.settings.threads)
        #: Per-request temp directories (Context.temp_dir) of this worker.
        self.temp_dirs = TempDirs(self.settings.extra.get("temp_dir"))  # type: ignore[arg-type]
        self.instance: Any = None
        self._ready = False
        #: Calls in flight on this runtime (counted by the envelopes): what an unload or
        #: a reload waits for before it closes the runtime.
        self.calls = 0
        #: The gate both transports pass: drain state, concurrency, metrics, access log.
        self.admission = admission if admission is not None else Admission(self.settings)
        self._methods: dict[str, Callable[..., Any]] = {}
        self._callers: dict[str, Callable[[dict[str, Any], Context], tuple[tuple, dict]]] = {}
        self._batchers: dict[str, Any] = {}
        self._plans: dict[str, RequestPlan] = plans if plans is not None else {
            name: RequestPlan(api) for name, api in spec.apis.items()}
        self._deadlines = Deadlines()
        #: OpenTelemetry spans of requests; None (and nothing imported) when off.
        if tracing is True:  # its own (one service alone)
            self.tracing = Tracing.from_settings(self.settings, spec.name,
                                                 self.admission.routes)
            if self.tracing is not None:
                self.admission.trace_id = self.tracing.trace_id
        else:
            self.tracing = tracing or None

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
        for plan in self._plans.values():
            plan.bind(self)
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
            observe = metrics.batch_observer(self.public(api.name))
        return Batcher(api, invoke, to_host,
                       max_queue_items=self.settings.batch_queue_items or None,
                       observe=observe, tracing=self.tracing)  # type: ignore[arg-type]

    @property
    def ready(self) -> bool:
        """Started and not closed. Setting it takes this runtime's plans in or out of
        service with it (their calls are refused "not ready" while it is False)."""
        return self._ready

    @ready.setter
    def ready(self, value: bool) -> None:
        self._ready = value
        for plan in self._plans.values():
            if plan._runtime is self:  # not if a newer runtime took the plan over
                plan.ready = value

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

    async def drained(self, timeout: float, step: float = 0.01) -> bool:
        """Wait until no call is in flight on this runtime (its plans already moved
        elsewhere or refuse new calls), up to `timeout` seconds; whether none is left.
        Polled: the envelopes pay one counter each way per call, nothing more."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.calls > 0 and loop.time() < deadline:
            await asyncio.sleep(step)
        return self.calls == 0

    # ------------------------------------------------------------------ calls
    def plan(self, name: str) -> RequestPlan:
        """The request plan of the API `name` (see `tensorwire.runtime.plan`): every
        transport runs its requests through it. Bound to this runtime at `start`."""
        return self._plans[name]

    def method(self, name: str) -> Callable[..., Any]:
        """The API's method, bound to the service instance (after `start`)."""
        return self._methods[name]

    def layout(self, name: str) -> Callable[[dict[str, Any], Context | None],
                                             tuple[tuple, dict]]:
        """How the API's validated arguments (and the Context) map onto its method's
        parameters, decided once."""
        return self._callers[name]  # type: ignore[return-value]

    @property
    def deadlines(self) -> Deadlines:
        """The per-request time limits of this worker's loop."""
        return self._deadlines

    def timed_out(self, limit: float, ctx: Context | None = None) -> DeadlineExceeded:
        """The error of a stream whose chunk ran past `limit` seconds (cancelling `ctx`)."""
        if ctx is not None:
            ctx.cancel()  # a sync generator still stepping may poll ctx.cancelled and stop
        return Expired(limit)

    def _prepare(self, api: APISpec, kwargs: dict[str, Any], ctx: Context | None):
        if not self.ready:
            raise ServiceUnavailable("the service is not ready")
        method = self._methods[api.name]
        args, kw = self._callers[api.name](kwargs, ctx)
        return method, args, kw

    def open_stream(self, api: APISpec, kwargs: dict[str, Any], ctx: Context | None
                    ) -> Stream:
        """Start a generator API's call, for a transport to iterate (see `streams`).

        The time limit applies to each chunk's production, not to the whole stream: a
        long generation that keeps producing is never cut. `ctx` is None only for an API
        that declares no Context (a compiled handler's call).
        """
        method, args, kw = self._prepare(api, kwargs, ctx)
        limit = self.timeout
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
