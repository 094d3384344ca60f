"""One API's request plan: the steps its requests take, chosen once when the server starts.

Every request of an API, on every transport (HTTP or gRPC, native or Open Inference
Protocol), runs the method through its plan, and the plan is the only path: as
pydantic-core compiles a schema once into one validator, the choices that used to be
made per request (or by a second, faster handler beside a general one) are made here,
from the descriptor, once:

- `needs_context`: whether a request needs a `Context` at all: the method declares one,
  or the API takes files (an upload lands in the request's temp dir). Every other
  request decodes in the plan's one shared `scope` and makes no Context, no lock, no
  temp-dir slot;
- `run(kwargs, ctx, remaining)`: the method called as its kind needs, under the
  server's time limit tightened by the client's deadline (gRPC passes its call's
  `time_remaining`, asked only when the call does not finish at once). An `async def` method that
  returns without suspending finishes inside `run` (its first step is taken at once,
  `runtime.eager`), and most do: no time limit is registered and nothing is awaited
  for it. Otherwise `run` hands back what the transport awaits: the rest of the method,
  a batch's answer (batching), a thread's result (`def` methods), with device tensors
  copied to the host in one transfer and the model's tracing span around it. Past its
  limit the awaitable raises `Expired`, which is a `DeadlineExceeded` (504 /
  DEADLINE_EXCEEDED) naming the limit;
- `open(kwargs, ctx)`: a generator API's `Stream` (its per-chunk time limit included);
- `ready` / `refusal`: whether the API takes calls now, and the error that refuses them
  when it does not (the service not started yet, or unloaded).
- for an API of a service with dependencies (`APISpec.composed`), a `CallFrame` per
  call (`runtime.call_frame`): the request's Context, deadline and cancellation, current
  while the method runs (its thread's too) or makes each chunk, for the dependency calls
  it makes; such a request always has a Context, and no eager first step;
- `feed(raw, decode, scope)`: for an API whose input is a stream (`AsyncIterator[T]`),
  the arguments of a call whose elements the transport hands over one raw message at a
  time (`input_stream.Elements`: validated per element by `decode`, pulled only when
  the method asks, bounded in count and idle time). `run` then limits the method's own
  time, not the time it waits for the client (`Deadlines.watch`), and the stream is
  closed when the call ends, waking a `def` method blocked on its next element.

    finished, value = plan.run(kwargs, ctx, remaining)
    result = value if finished else await value

`run` is a plain function returning a pair rather than a coroutine on purpose: a
coroutine frame around every call cost about a microsecond a request
(bench/instructions.py), a tenth of what tensorwire adds to a small request.

A plan outlives the service instance it runs on: the routes of both transports hold it
for the server's lifetime, and `bind` points it at a started `ServiceRuntime` (its
instance, threads, batchers and limits), again after the service is unloaded and loaded
(`unbind` refuses calls meanwhile). The envelopes read `ready`, `run` and `scope` from
the plan per request, an attribute each.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..contract.descriptor import APISpec
from ..errors import ServiceUnavailable, TensorwireError
from . import call_frame
from .call_frame import CallFrame
from .chunk_stream import Stream
from .eager import resumed
from .input_stream import ElementDecoder, Elements, SyncElements

if TYPE_CHECKING:
    from ..context import Context
    from .service import ServiceRuntime

#: `run`'s answer: (True, the result) when the call finished inside it, else (False,
#: the awaitable that gives the result).
Outcome = tuple[bool, Any]
#: The seconds the client still waits, asked for only when needed (None: no deadline).
Remaining = Callable[[], "float | None"] | None
Run = Callable[[dict[str, Any], "Context | None", Remaining], Outcome]


class CallScope:
    """The decode scope of requests that need no Context: a request is being read,
    under the server's limits; nothing is stored per request (no file input means no
    upload to place)."""

    reading_request = True
    __slots__ = ("limits",)

    def __init__(self, limits: Mapping[str, Any]) -> None:
        self.limits = limits

    @property
    def temp_dir(self) -> Any:
        raise RuntimeError("an API without file inputs has no temp dir to decode into")

    @property
    def state(self) -> dict[str, Any]:
        return {}


class RequestPlan:
    """The steps of one API's requests (see the module docstring)."""

    __slots__ = ("_runtime", "api", "name", "needs_context", "owner", "ready", "refusal",
                 "run", "scope", "stream", "streams_in")

    def __init__(self, api: APISpec, runtime: ServiceRuntime | None = None) -> None:
        self.api = api
        self.name = api.name
        #: Whether the API streams its output (a generator): `open`, not `run`.
        self.stream = api.output.stream
        self.needs_context = api.context_param is not None or api.has_files or api.composed
        #: Whether the API's input is a stream of elements (`feed`).
        self.streams_in = api.stream_input is not None
        #: Whether calls are taken now; `refusal` answers them while not.
        self.ready = False
        self.refusal: TensorwireError = ServiceUnavailable("the service is not ready")
        self._runtime: ServiceRuntime | None = None
        #: What counts the calls in flight (the bound runtime's `calls`: an unload or a
        #: reload waits for them); the envelopes count each admitted call on it.
        self.owner: Any = _Unbound()
        #: What a request decodes in when it has no Context.
        self.scope = CallScope({})
        self.run: Run = _not_bound
        if runtime is not None:
            self.bind(runtime)

    def bind(self, runtime: ServiceRuntime) -> None:
        """Run calls on `runtime` (started: its methods are bound) from now on."""
        self._runtime = runtime
        self.owner = runtime
        self.scope = CallScope(runtime.settings.extra)
        self.run = (_no_run if self.stream else
                    self._streamed_run() if self.streams_in else self._unary_run())
        self.ready = True

    def unbind(self, refusal: TensorwireError | None = None) -> None:
        """Take no more calls: each is answered `refusal` (by default "not ready")."""
        self.ready = False
        self.refusal = refusal or ServiceUnavailable("the service is not ready")

    @property
    def runtime(self) -> ServiceRuntime:
        """The runtime calls run on (the last one bound)."""
        assert self._runtime is not None, f"{self.name}: the plan was never bound"
        return self._runtime

    def context(self, info: Any) -> Context:
        """A new request's Context, its temp dir from the runtime's pool."""
        return self.runtime.context(info)

    def open(self, kwargs: dict[str, Any], ctx: Context | None) -> Stream:
        """Start a generator API's call (`ServiceRuntime.open_stream`); a streamed
        input waits for the client under the stream's watch, and closes with it."""
        stream = self.runtime.open_stream(self.api, kwargs, ctx)
        if self.api.composed and ctx is not None:  # its chunks' dependency calls
            frame = CallFrame(ctx, None, asyncio.get_running_loop())
            stream.chunks = call_frame.framed_chunks(stream.chunks, frame)
        if self.streams_in:
            inputs = kwargs[self.api.stream_input.name]  # type: ignore[union-attr]
            inputs.mark = stream.mark
            stream.inputs = inputs
        return stream

    def feed(self, raw: AsyncIterator[Any], decode: ElementDecoder, scope: Any
             ) -> dict[str, Any]:
        """The arguments of a streamed-input call: its elements, as the method iterates
        them (`async for`, or `for` in a `def`), from the transport's raw messages
        (`raw`) validated one by one by `decode` in `scope` (see `input_stream`)."""
        field = self.api.stream_input
        assert field is not None, f"{self.name} takes no stream"
        settings = self.runtime.settings
        elements = Elements(raw, decode, scope, field.name, settings.max_stream_elements,
                            settings.stream_idle_timeout)
        return {field.name: elements if self.api.is_async else SyncElements(elements)}

    # ------------------------------------------------------------------ choosing `run`
    def _limit(self) -> Callable[[Remaining], float | None]:
        """The seconds a call may take: the server's limit, or the client's deadline
        when it is shorter."""
        timeout = self.runtime.timeout

        def limit_for(remaining: Remaining) -> float | None:
            deadline = remaining() if remaining is not None else None
            if deadline is None or (timeout is not None and timeout <= deadline):
                return timeout
            return max(deadline, 0.0)

        return limit_for

    def _unary_run(self) -> Run:
        api, runtime = self.api, self.runtime
        deadlines = runtime.deadlines
        limit_for = self._limit()
        if api.composed and not api.batchable:  # a batch serves many requests: no frame
            return self._framed_run()
        if (api.is_async and not api.batchable and not api.output.codec.has_tensors
                and runtime.tracing is None):
            call = self._coroutine()

            def run_eager(kwargs: dict[str, Any], ctx: Context | None,
                          remaining: Remaining) -> Outcome:
                coro = call(kwargs, ctx)
                try:  # the method's first step now: most finish in it (runtime.eager)
                    first = coro.send(None)
                except StopIteration as done:
                    return True, done.value
                rest = resumed(coro, first)
                limit = limit_for(remaining)
                return False, rest if limit is None else deadlines.run(limit, rest)

            return run_eager
        work = self._work()

        def run(kwargs: dict[str, Any], ctx: Context | None,
                remaining: Remaining) -> Outcome:
            awaitable = work(kwargs, ctx)
            limit = limit_for(remaining)
            return False, awaitable if limit is None else deadlines.run(limit, awaitable)

        return run

    def _framed_run(self) -> Run:
        """`run` of a composed API: the call's `CallFrame` current while the method
        runs (a `def` method's thread gets it with the context its job carries);
        the request's cancellation cancels the inner calls its thread started."""
        work, deadlines = self._work(), self.runtime.deadlines
        limit_for = self._limit()
        enter, leave = call_frame.enter, call_frame.leave

        async def framed(kwargs: dict[str, Any], ctx: Context, frame: CallFrame) -> Any:
            token = enter(frame)
            try:
                return await work(kwargs, ctx)
            except asyncio.CancelledError:
                frame.cancel()
                raise
            finally:
                leave(token)

        def run(kwargs: dict[str, Any], ctx: Context | None, remaining: Remaining
                ) -> Outcome:
            limit = limit_for(remaining)
            assert ctx is not None, "a composed API's request always has a Context"
            frame = CallFrame(ctx, limit, asyncio.get_running_loop())
            awaitable = framed(kwargs, ctx, frame)
            return False, awaitable if limit is None else deadlines.run(limit, awaitable)

        return run

    def _streamed_run(self) -> Run:
        """`run` of a streamed-input API: the method's time under a watch that the
        waits for the client's elements hold (a long, slow stream is never cut for
        the client's pace), and the stream closed when the call ends. The client's own
        deadline is its transport's to enforce (grpc.aio cancels the call at it)."""
        work, deadlines = self._work(), self.runtime.deadlines
        timeout = self.runtime.timeout
        name = self.api.stream_input.name  # type: ignore[union-attr]

        async def watched(kwargs: dict[str, Any], ctx: Context | None) -> Any:
            inputs = kwargs[name]
            watch = deadlines.watch(timeout) if timeout is not None else None
            inputs.mark = watch
            try:
                return await work(kwargs, ctx)
            except asyncio.CancelledError:
                if watch is not None:
                    watch.check()  # Expired (DeadlineExceeded) when the limit fired
                raise
            finally:
                if watch is not None:
                    watch.close()
                inputs.close()

        def run(kwargs: dict[str, Any], ctx: Context | None, remaining: Remaining
                ) -> Outcome:
            return False, watched(kwargs, ctx)

        return run

    def _coroutine(self) -> Callable[[dict[str, Any], Context | None], Any]:
        """The method's own coroutine for validated arguments (and the Context where it
        declares one), with the argument layout decided once."""
        api = self.api
        method = self.runtime.method(api.name)
        if api.context_param is None:
            if api.is_root:  # the one input is positional (it may be positional-only)
                root = api.root_field.name
                return lambda kwargs, ctx: method(kwargs[root])
            return lambda kwargs, ctx: method(**kwargs)
        layout = self.runtime.layout(api.name)

        def with_context(kwargs: dict[str, Any], ctx: Context | None) -> Any:
            args, kw = layout(kwargs, ctx)
            return method(*args, **kw)

        return with_context

    def _work(self) -> Callable[[dict[str, Any], Context | None], Any]:
        """What a call that does not finish in `run` awaits, by the API's kind."""
        api, runtime = self.api, self.runtime
        tracing = runtime.tracing
        on_device = api.output.codec.has_tensors
        if api.batchable:  # the batch traces its own call and copies its own outputs
            submit = runtime.batcher(api.name).submit
            return lambda kwargs, ctx: submit(kwargs)
        if api.is_async:
            call = self._coroutine()
            if not on_device and tracing is None:
                return call

            async def on_host(kwargs: dict[str, Any], ctx: Context | None) -> Any:
                result = await call(kwargs, ctx)
                return await runtime.to_host(api, result) if on_device else result

            if tracing is None:
                return on_host
            return lambda kwargs, ctx: tracing.model_call(on_host(kwargs, ctx))
        return self._in_thread(on_device)

    def _in_thread(self, on_device: bool) -> Callable[[dict[str, Any], Context | None], Any]:
        """A `def` method's call on the runtime's threads (`Handoff`)."""
        api, runtime = self.api, self.runtime
        method, layout = runtime.method(api.name), runtime.layout(api.name)
        run_in_thread = runtime.handoff.run
        tracing = runtime.tracing

        def job_of(kwargs: dict[str, Any], ctx: Context | None) -> Any:
            args, kw = layout(kwargs, ctx)
            call = functools.partial(method, *args, **kw)
            if tracing is not None:  # the method's own spans nest under the request
                call = tracing.in_context(call)
            return run_in_thread(call)

        async def guarded(kwargs: dict[str, Any], ctx: Context | None) -> Any:
            job = job_of(kwargs, ctx)
            try:
                result = await job.future
            except asyncio.CancelledError:
                if ctx is not None:
                    ctx.cancel()  # the thread runs on; a method may poll ctx.cancelled
                    ctx.close_after(job)  # and its temp files stay until it returns
                raise
            return await runtime.to_host(api, result) if on_device else result

        if tracing is not None:
            return lambda kwargs, ctx: tracing.model_call(guarded(kwargs, ctx))
        if not on_device and not self.needs_context:
            # nothing to do when the caller stops waiting: no Context, no temp dir
            return lambda kwargs, ctx: job_of(kwargs, ctx).future
        return guarded


def _no_run(kwargs: dict[str, Any], ctx: Context | None, remaining: Remaining) -> Outcome:
    raise TypeError("a streaming API is started with RequestPlan.open, not run")


def _not_bound(kwargs: dict[str, Any], ctx: Context | None, remaining: Remaining) -> Outcome:
    raise ServiceUnavailable("the service is not ready")


class _Unbound:
    """The call count of a plan no runtime took yet (no call is admitted to it)."""

    calls = 0
