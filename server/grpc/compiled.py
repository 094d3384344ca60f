"""A unary API's gRPC handler, compiled when the server is built.

The general handler (`GrpcEndpoint.unary`) makes a `Context` per call (a lock, a
temp-dir slot, lazy metadata), a `Ticket`, and goes through `ServiceRuntime.call`, which
wraps the method in another coroutine under its time limit. Most APIs take no Context,
have no file inputs and run without tracing; for them this closure holds only what the
API needs, decided once (as `tensorwire.http.compiled` does for HTTP):

- admission inline (`Admission.enter`/`leave`) with the metrics series held; the
  request's id and peer made only for an error or an access line;
- the request parsed and decoded in a scope shared by every call (`_CallScope`: no
  uploads to place, so no temp dir);
- the method called directly (`ServiceRuntime.direct`); an `async def` one takes its
  first step at once (`runtime.eager`), and what is left is awaited under the shorter
  of the server's time limit and the client's deadline (`Deadlines.run`).

A call the closure does not cover (draining, over the concurrency limit, not ready) goes
to the general handler, which refuses it exactly as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import grpc

from ..context import Headers, RequestInfo
from ..runtime.deadlines import Expired
from ..runtime.eager import first_step

if TYPE_CHECKING:
    from .server import GrpcEndpoint

#: Calls in flight on this worker from which a compiled stream gives the loop three
#: passes after each chunk instead of one (see `compile_stream`).
CROWDED = 8

Unary = Callable[[bytes, grpc.aio.ServicerContext], Awaitable[bytes]]
Stream = Callable[[bytes, grpc.aio.ServicerContext], AsyncIterator[bytes]]


class _CallScope:
    """The decode scope of a call whose API has no file inputs: a request is being
    read, under the server's limits; nothing is stored per call."""

    reading_request = True
    __slots__ = ("limits",)

    def __init__(self, limits: Mapping[str, Any]) -> None:
        self.limits = limits

    @property
    def temp_dir(self) -> Any:  # pragma: no cover - only file codecs ask, never compiled
        raise RuntimeError("an API with file inputs has no compiled gRPC handler")

    @property
    def state(self) -> dict[str, Any]:
        return {}


def _request_decoder(endpoint: GrpcEndpoint) -> Callable[[bytes], dict[str, Any]]:
    """Request bytes to validated keyword arguments, in one scope shared by every call."""
    read = endpoint.messages.request_reader()
    decode = endpoint.decoder.read_values_decoder()
    scope = _CallScope(endpoint.runtime.settings.extra)

    def decode_request(data: bytes) -> dict[str, Any]:
        return decode(read(data, scope))

    return decode_request


def _request_info(endpoint: GrpcEndpoint) -> Callable[[grpc.aio.ServicerContext],
                                                      RequestInfo]:
    """The RequestInfo of a call, made only for an error or an access line."""
    name = endpoint.api.name
    metadata_of = endpoint.metadata_of

    def request_info(context: grpc.aio.ServicerContext) -> RequestInfo:
        return RequestInfo("grpc", name, Headers(metadata_of(context)), context.peer)

    return request_info


def compile_unary(endpoint: GrpcEndpoint) -> Unary | None:
    """The compiled handler of `endpoint`'s unary API, or None when it needs the general
    one (a stream, file inputs, a Context parameter, tracing, device outputs)."""
    api = endpoint.api
    runtime = endpoint.runtime
    if api.output.stream or api.has_files or endpoint.tracing is not None:
        return None
    call = runtime.direct(api)
    if call is None:
        return None
    decode_request, request_info = _request_decoder(endpoint), _request_info(endpoint)
    encode = endpoint.messages.response_encoder()
    admission = runtime.admission
    general = endpoint.unary
    series = admission.series("grpc", api.name)
    enter, leave = admission.enter, admission.leave
    limit = admission.limit
    limit_for = runtime.limit_for
    deadlines = runtime.deadlines
    timed_out = runtime.timed_out
    failed, abort = endpoint.failed, endpoint.abort
    name = api.name
    eager = api.is_async and not api.batchable  # `call` gives the method's coroutine

    async def unary(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if admission.draining or (limit and admission.in_flight >= limit) or not runtime.ready:
            return await general(data, context)
        start = enter(series)
        info: RequestInfo | None = None
        code, sent = "OK", 0
        try:
            work = call(decode_request(data))
            # the method's first step now: most finish in it (runtime.eager)
            finished, value = first_step(work) if eager else (False, work)
            if finished:
                result = value
            elif (seconds := limit_for(context.time_remaining())) is None:
                result = await value
            else:
                try:
                    result = await deadlines.run(seconds, value)
                except Expired:
                    raise timed_out(seconds) from None
            out = encode(result)
            sent = len(out)
            return out
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except grpc.aio.AbortError:
            code = "ABORTED"
            raise
        except Exception as exc:
            info = request_info(context)
            err = failed(exc, info.id)
            code = err.grpc_code
            await abort(context, err, info.id)
            raise  # unreachable: abort raises
        finally:
            leave(series, start, "grpc", name, code, len(data), sent,
                  info if info is not None else lambda: request_info(context))

    return unary


def compile_stream(endpoint: GrpcEndpoint) -> Stream | None:
    """The compiled handler of `endpoint`'s server-streaming API, or None when it needs
    the general one (file inputs, a Context parameter, tracing).

    A stream's per-call bookkeeping (a Context, a Ticket, admission in a coroutine of its
    own) is what made a new stream wait behind the ones in flight once the loop was
    saturated (bench/README.md: time to first chunk at 64 streams). The chunks come
    straight from the method's generator (`ServiceRuntime.open_stream`: per-chunk time
    limit, device copies), with no async generator layer between it and grpc.aio.

    Each chunk is followed by one pass of the event loop (`asyncio.sleep(0)`). Without
    it a stream resumed by its write's completion went on to its next chunk in the same
    pass, and at 64 streams on one saturated core new calls waited behind the ones in
    flight: the time to first chunk was 105-108 ms, 52-62 ms with the pass, for the
    same chunks/s (bench/README.md). Taking a new call is itself several passes in
    grpc.aio (the completion of its request, the server loop's step, the handler's
    task), so once `CROWDED` calls are in flight a stream gives three: at 64 streams
    the time to first chunk fell to 8-12 ms (p99 58-63 ms) for the same CPU per stream.
    Below that the loop has time to spare, and a lone stream pays no extra passes.
    """
    api = endpoint.api
    runtime = endpoint.runtime
    if (not api.output.stream or api.has_files or api.context_param is not None
            or endpoint.tracing is not None):
        return None
    decode_request, request_info = _request_decoder(endpoint), _request_info(endpoint)
    encode = endpoint.messages.response_encoder()
    admission = runtime.admission
    general = endpoint.stream
    series = admission.series("grpc", api.name)
    enter, leave = admission.enter, admission.leave
    limit = admission.limit
    open_stream = runtime.open_stream
    failed, abort = endpoint.failed, endpoint.abort
    name = api.name

    async def stream(data: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        if admission.draining or (limit and admission.in_flight >= limit) or not runtime.ready:
            async for out in general(data, context):
                yield out
            return
        start = enter(series)
        info: RequestInfo | None = None
        code, sent = "OK", 0
        run = None
        try:
            # the loop of runtime.streams inline: the method's generator, no layer between
            run = open_stream(api, decode_request(data), None)
            mark = run.mark
            try:
                async for chunk in run.chunks:
                    mark.made += 1
                    mark.holding = True  # grpc.aio's time with the message is not the method's
                    out = encode(chunk)
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
        except asyncio.CancelledError:
            code = "CANCELLED"
            raise
        except grpc.aio.AbortError:
            code = "ABORTED"
            raise
        except Exception as exc:
            info = request_info(context)
            err = failed(exc, info.id)
            code = err.grpc_code
            await abort(context, err, info.id)
        finally:
            if run is not None:
                await run.aclose()
            leave(series, start, "grpc", name, code, len(data), sent,
                  info if info is not None else lambda: request_info(context))

    return stream
