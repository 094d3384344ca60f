"""The one gRPC envelope: what every API call goes through, native or Open Inference
Protocol, unary or streamed.

grpclib serves every method with one request handler; here `GrpcEnvelope` is that
handler for tensorwire's calls, and a `GrpcRoute` says what is particular to one API on
one wire: how a request's bytes become validated arguments (`read`) and how a result or
a chunk becomes a message (`write`). Everything around them is written once, here:

- admission: a call while the server drains, over `max_concurrency` or not ready is
  refused (UNAVAILABLE / RESOURCE_EXHAUSTED) and counted;
- the API's request plan (`tensorwire.runtime.plan`): the method's call under the
  shorter of the server's time limit and the client's deadline, a `Context` only for
  an API that needs one, and a stream's chunks under their per-chunk limit;
- cancellation (the client's, or the limit's), the metrics series, the access line
  (its request id and peer made only when a line is written or an error answered), the
  tracing span (`--tracing`), and the failure mapping (`failures`: the error model's
  status, details, error kind and request id; or, for Triton's stream, the same error
  as an in-band message).

The unary and the stream handler differ only in how grpc.aio takes their answer (a
return, a yield); their refusal, accounting and failure steps are the same methods.
Each serves both request cardinalities: `data` is the request's bytes, or, for an API
whose input is a stream (client-streaming and bidirectional rpcs), the call's request
messages (`Received`), which the route's `read` hands to the plan's element stream.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import grpc

from ..context import Context, Headers, RequestInfo
from ..errors import Cancelled, TensorwireError
from ..runtime.plan import RequestPlan
from ..runtime.service import ServiceRuntime
from ..telemetry.metrics import Series
from .call_failures import abort, failed

#: Calls in flight on this worker from which a stream gives the loop three passes after
#: each chunk instead of one (see `GrpcEnvelope.stream`).
CROWDED = 8


@dataclass(eq=False)
class GrpcRoute:
    """One API on one gRPC wire: its plan, and how its messages read and write."""

    #: The API's (or v2 model's) name: metrics, access lines, logs.
    name: str
    plan: RequestPlan
    #: (the request's bytes, or what the servicer parsed of them; the decode scope) ->
    #: validated keyword arguments.
    read: Callable[[Any, Any], dict[str, Any]]
    #: A result or a chunk -> the message's bytes; with `writes_per_request`, called
    #: as `write(result, request)` (the request as `read` got it: a v2 answer names
    #: the request's id and outputs).
    write: Callable[..., bytes]
    #: Names what failed in the log (`v2 <model>` for the Open Inference Protocol).
    what: str = ""
    #: The route's metrics series (set by the envelope; None with metrics off).
    series: Series | None = None
    #: Whether its successful calls' decode, compute and encode times are measured
    #: (Triton's statistics: the v2 routes; two clock reads a call).
    timed: bool = False
    #: Whether `write` takes the request beside the result (one Python call less a
    #: message for the routes that do not: an API's own).
    writes_per_request: bool = False

    def __post_init__(self) -> None:
        self.what = self.what or self.name


#: Loop passes a streamed input's end waits for a cancellation on its way (`Received`).
_SETTLE = 8


class Received:
    """A streamed-input call's request messages as grpc.aio delivers them, counting
    their bytes: `len()` is the bytes received so far, so that the envelope accounts a
    stream of requests as it accounts one request's bytes.

    grpc.aio ends the messages of a call the client cancelled as if the client had
    finished sending, and cancels the handler's task a moment later (the two arrive
    from the same poll). So the end waits `_SETTLE` passes of the loop first: a cancel
    on its way lands (the plan then closes the stream, and a `def` method waiting for
    its next element gets `Cancelled`), and a method never takes a cut stream for a
    whole one. A stream that really ended pays the passes once.

    Each pass first yields the GIL (`os.sched_yield()`, ~0.2 us): the cancel reaches
    the loop from grpc's poller thread, which needs the GIL to hand it over, and passes
    that keep it could end before that thread got it. Measured with both cores busy:
    without yielding the cancel came 2 passes after the end in 29 of 30 calls and once
    after 5,157 passes (9 ms), a method then taking the cut stream for a whole one;
    yielding, 2 passes in 38 of 40, 4 and 5 in the others, so 8 passes. (`time.sleep(0)`
    settled it in 3, but costs ~80 us a call with the loop blocked: timer slack.)
    """

    __slots__ = ("_context", "_messages", "size")

    def __init__(self, messages: AsyncIterator[bytes], context: grpc.aio.ServicerContext
                 ) -> None:
        self._messages = messages.__aiter__()
        self._context = context
        self.size = 0

    def __aiter__(self) -> Received:
        return self

    async def __anext__(self) -> bytes:
        try:
            data = await self._messages.__anext__()
        except StopAsyncIteration:
            for _ in range(_SETTLE):
                os.sched_yield()  # hands the GIL to grpc's poller thread, see above
                await asyncio.sleep(0)
            if self._context.cancelled():
                raise Cancelled("the client cancelled the call mid-stream") from None
            raise
        self.size += len(data)
        return data

    def __len__(self) -> int:
        return self.size


def metadata_of(context: grpc.aio.ServicerContext) -> Callable[[], list[tuple[str, str]]]:
    """The call's text metadata, read when first asked for (see `Headers`)."""
    def metadata() -> list[tuple[str, str]]:
        return [(k, v) for k, v in (context.invocation_metadata() or ())
                if not k.endswith("-bin")]

    return metadata


def request_info(name: str, context: grpc.aio.ServicerContext) -> RequestInfo:
    """A call's RequestInfo: metadata, peer and request id all read lazily."""
    return RequestInfo("grpc", name, Headers(metadata_of(context)), context.peer)


class GrpcEnvelope:
    """Admission, plan, cancellation, metrics, access line, span and failure mapping of
    every gRPC call of one worker (see the module docstring)."""

    def __init__(self, runtime: ServiceRuntime, log: logging.Logger) -> None:
        """`runtime`: any runtime of the server (they share its admission and tracing);
        each route's own plan says whether its API is ready and runs its calls."""
        self.runtime = runtime
        self.admission = runtime.admission
        self.tracing = runtime.tracing
        self.log = log

    def route(self, route: GrpcRoute, rpc_method: str | None = None,
              rpc_path: str | None = None) -> GrpcRoute:
        """Register `route`: its metrics series (an API's, whichever wire calls it) and,
        for an API's own method, how access lines and spans name it."""
        if rpc_method is not None and rpc_path is not None:
            self.admission.describe("grpc", route.name, rpc_method, rpc_path)
        route.series = self.admission.series("grpc", route.name)
        return route

    # ------------------------------------------------------------------ steps
    def _refused(self, route: GrpcRoute) -> bool:
        admission = self.admission
        return (admission.draining or (admission.limit and admission.in_flight >= admission.limit)
                or not route.plan.ready)

    def _refusal(self, route: GrpcRoute, context: grpc.aio.ServicerContext
                 ) -> tuple[TensorwireError, RequestInfo]:
        """What refuses a call now (recorded as answered), with its RequestInfo."""
        info = request_info(route.name, context)
        error = self.admission.refusal() or route.plan.refusal
        self.admission.refused("grpc", route.name, info, error)
        return error, info

    def _begin(self, route: GrpcRoute, context: grpc.aio.ServicerContext
               ) -> tuple[RequestInfo | None, Context | None, Any]:
        """The RequestInfo, Context and span of a call whose plan or tracing wants them
        (None for the rest, made later only if an error or an access line asks)."""
        if not route.plan.needs_context and self.tracing is None:
            return None, None, None
        info = request_info(route.name, context)
        ctx = route.plan.context(info) if route.plan.needs_context else None
        span = self.tracing.start(info) if self.tracing is not None else None
        return info, ctx, span

    def _caught(self, route: GrpcRoute, exc: BaseException, info: RequestInfo | None,
                ctx: Context | None, context: grpc.aio.ServicerContext
                ) -> tuple[str, RequestInfo | None, TensorwireError | None]:
        """What ended a call: (its status for the metrics, its RequestInfo, the error
        to answer in the error model, a private one already an InternalError; None
        when the call is over already: cancelled, or aborted, and the caller
        re-raises). An error is logged when it is not the client's fault."""
        if ctx is not None:
            ctx.cancel()  # a `def` method still running may poll ctx.cancelled and stop
        if isinstance(exc, grpc.aio.AbortError):
            return "ABORTED", info, None
        if not isinstance(exc, Exception):  # CancelledError: the client or a shutdown
            return "CANCELLED", info, None
        if info is None:
            info = request_info(route.name, context)
        err = failed(exc, route.what, info.id, self.log)
        return err.grpc_code, info, err

    def _end(self, route: GrpcRoute, start: float, code: str, received: int, sent: int,
             info: RequestInfo | None, ctx: Context | None, span: Any,
             context: grpc.aio.ServicerContext, ran: float = 0.0, done: float = 0.0
             ) -> None:
        """Count the call out: its Context closed, metrics (with its phases: `ran`,
        `done`), access line, span."""
        if ctx is not None:
            ctx.close()
        self.admission.leave(route.series, start, "grpc", route.name, code, received, sent,
                             info if info is not None else
                             lambda: request_info(route.name, context), ran, done)
        if span is not None:  # after the access line, which reads its trace id
            span.finish(code)

    @staticmethod
    async def _send_headers(context: grpc.aio.ServicerContext, ctx: Context | None) -> None:
        """The headers the method set on its Context, as initial metadata."""
        if ctx is not None and ctx.response.headers:
            await context.send_initial_metadata(
                [(k.lower(), v) for k, v in ctx.response.headers.items()])

    # ------------------------------------------------------------------ calls
    async def unary(self, route: GrpcRoute, data: Any, context: grpc.aio.ServicerContext,
                    payload: Any = None, inband: Callable[[TensorwireError], bytes] | None = None
                    ) -> bytes:
        """One call answered with one message: `data` the request's bytes (`payload`:
        what the servicer already parsed of them, else `data` is read), or a
        client-streaming call's request messages. `inband`: answer a failure as this
        message instead of ending the call with its status (Triton's stream)."""
        if type(data) is not bytes:  # a client-streaming call's messages
            data = Received(data, context)
        admission, plan = self.admission, route.plan
        # the checks of `_refused`, inline on the path every unary call takes (each
        # Python call here is about 1k instructions of a ~300k call)
        if (admission.draining or (admission.limit and admission.in_flight >= admission.limit)
                or not plan.ready):
            error, info = self._refusal(route, context)
            if inband is not None:
                return inband(error)
            await abort(context, error, info.id)
        start = admission.enter(route.series)
        if plan.needs_context or self.tracing is not None:
            info, ctx, span = self._begin(route, context)
        else:
            info = ctx = span = None
        code, sent = "OK", 0
        ran = done = 0.0  # when the plan's call began and ended (timed routes)
        timed = route.timed
        request = data if payload is None else payload
        owner = plan.owner  # counts the call: an unload waits for its runtime's calls
        owner.calls += 1
        try:
            kwargs = route.read(request, plan.scope if ctx is None else ctx)
            if span is not None:
                span.decoded()
            if timed:
                ran = perf_counter()
            finished, value = plan.run(kwargs, ctx, context.time_remaining)
            result = value if finished else await value
            if timed:
                done = perf_counter()
            if span is not None:
                span.encoding()
            out = (route.write(result, request) if route.writes_per_request
                   else route.write(result))
            if ctx is not None:
                await self._send_headers(context, ctx)
            sent = len(out)
            return out
        except BaseException as exc:
            code, info, err = self._caught(route, exc, info, ctx, context)
            if err is None:
                raise
            if inband is None:
                await abort(context, err, info.id)  # raises
            return inband(err)  # type: ignore[misc]
        finally:
            owner.calls -= 1
            if ctx is not None:
                ctx.close()
            admission.leave(route.series, start, "grpc", route.name, code, len(data), sent,
                            info if info is not None else
                            lambda: request_info(route.name, context), ran, done)
            if span is not None:  # after the access line, which reads its trace id
                span.finish(code)

    async def stream(self, route: GrpcRoute, data: Any, context: grpc.aio.ServicerContext,
                     payload: Any = None,
                     inband: Callable[[TensorwireError], bytes] | None = None
                     ) -> AsyncIterator[bytes]:
        """One server-streaming call: a message per chunk, as the method yields it
        (`data`: the request's bytes, or a bidirectional call's request messages;
        `payload` and `inband` as for `unary`: a failure is then the last message).

        Each chunk is followed by one pass of the event loop (`asyncio.sleep(0)`).
        Without it a stream resumed by its write's completion went on to its next chunk
        in the same pass, and at 64 streams on one saturated core new calls waited
        behind the ones in flight: the time to first chunk was 105-108 ms, 52-62 ms with
        the pass, for the same chunks/s (bench/NOTES.md). Taking a new call is itself
        several passes in grpc.aio (the completion of its request, the server loop's
        step, the handler's task), so once `CROWDED` calls are in flight a stream gives
        three: at 64 streams the time to first chunk fell to 8-12 ms (p99 58-63 ms) for
        the same CPU per stream. Below that the loop has time to spare, and a lone
        stream pays no extra passes.
        """
        if type(data) is not bytes:  # a bidirectional call's messages
            data = Received(data, context)
        if self._refused(route):
            error, info = self._refusal(route, context)
            if inband is not None:
                yield inband(error)
                return
            await abort(context, error, info.id)
        admission = self.admission
        start = admission.enter(route.series)
        info, ctx, span = self._begin(route, context)
        code, sent = "OK", 0
        plan = route.plan
        write, per_request = route.write, route.writes_per_request
        run = None
        owner = plan.owner  # counts the call: an unload waits for its runtime's calls
        owner.calls += 1
        request = data if payload is None else payload
        try:
            kwargs = route.read(request, plan.scope if ctx is None else ctx)
            if span is not None:
                span.decoded()
            # the loop of runtime.streams inline: the method's generator, no layer between
            run = plan.open(kwargs, ctx)
            mark = run.mark
            headers_due = ctx is not None
            try:
                async for chunk in run.chunks:
                    mark.made += 1
                    mark.holding = True  # grpc.aio's time with the message is not the method's
                    out = write(chunk, request) if per_request else write(chunk)
                    if headers_due:
                        await self._send_headers(context, ctx)
                        headers_due = False
                    sent += len(out)
                    yield out
                    # one pass of the loop between two chunks (not the method's time), so
                    # that grpc.aio, accepting one new call a pass, takes new streams
                    await asyncio.sleep(0)
                    if admission.in_flight >= CROWDED:
                        await asyncio.sleep(0)  # room for a whole acceptance, see above
                        await asyncio.sleep(0)
                    mark.holding = False
            except asyncio.CancelledError:
                run.check()  # DeadlineExceeded when the time limit fired
                raise
        except BaseException as exc:
            code, info, err = self._caught(route, exc, info, ctx, context)
            if err is None:
                raise
            if inband is not None:  # the error is the stream's last message
                yield inband(err)
            else:
                await abort(context, err, info.id)
        finally:
            owner.calls -= 1
            if run is not None:
                await run.aclose()
            self._end(route, start, code, len(data), sent, info, ctx, span, context)
