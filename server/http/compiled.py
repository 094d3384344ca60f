"""A JSON API's HTTP handler, compiled when the service is served.

The general handler (`HttpEndpoint.handle`) serves every shape of request: roots,
files, multipart, streams, compressed bodies, Context parameters, tracing. Each of those
costs every request something (a `Context` with its lock, a `Ticket`, a `RequestInfo`,
a coroutine per call, per-request checks of flags that never change). Most APIs are a
JSON object in and a JSON value out, called with neither a Context nor tracing; for them
this closure holds only what the API needs, decided once:

- admission inline (`Admission.enter`/`leave`), the metrics series held, the request's
  id and peer made only for an error or an access line;
- the method called directly (`ServiceRuntime.direct`); an `async def` one takes its
  first step at once, and only if it suspends is the rest awaited under the worker's
  one deadline sweeper (`runtime.eager`, `Deadlines.run`);
- the output written straight to JSON bytes (`HttpFacet.json_encoder`).

A streaming API with a JSON body gets one too (`compile_stream_handler`): the same
inline admission around `HttpEndpoint.stream`, with no Context.

Where nothing wraps the routes (no auth, no CORS), each connection reaches these
handlers without aiohttp's router, and a unary one writes its 200 answer itself
(`tensorwire.http.direct`).

A request the closure does not cover (another content type, a compressed or unsized
body, a refusal while draining or over the concurrency limit) goes to the general
handler, which answers it exactly as before: behaviour is the same, only the cost differs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiohttp import web

from ..context import Headers, RequestInfo
from ..runtime.deadlines import Expired
from ..runtime.eager import first_step
from .direct import Handler, JsonAnswer

if TYPE_CHECKING:
    from .endpoint import HttpEndpoint

_JSON_HEADERS = (("Content-Type", "application/json"),)


def compile_handler(endpoint: HttpEndpoint, *, direct: bool = False) -> Handler | None:
    """The compiled handler of `endpoint`'s API, or None when its API needs the general
    one (a root input, files, a Context parameter, tracing, tensor outputs).

    `direct`: the variant `DirectRoutes` calls, past the router, for an application with
    no middleware or response signal: its 200 answers are `JsonAnswer`s, written whole
    by the handler's own code rather than by aiohttp's response machinery."""
    api = endpoint.api
    runtime = endpoint.runtime
    if api.is_root or api.has_files:
        return None
    if api.output.stream:
        return compile_stream_handler(endpoint)
    encode = api.output.codec.http.json_encoder()
    call = runtime.direct(api)
    if encode is None or call is None:
        return None
    admission = runtime.admission
    general = endpoint.handle
    taken = _taken(endpoint)
    failure = endpoint.failure
    decode = endpoint.decoder.json_decoder()
    series = admission.series("http", api.name)
    enter, leave = admission.enter, admission.leave
    timeout = admission.timeout
    deadlines = runtime.deadlines
    timed_out = runtime.timed_out
    name = api.name
    eager = api.is_async and not api.batchable  # `call` gives the method's coroutine
    answer: Callable[[bytes], web.StreamResponse] = JsonAnswer if direct else _json_response

    async def handle(request: web.Request) -> web.StreamResponse:
        received = taken(request)
        if received < 0:
            return await general(request)
        start = enter(series)
        info: RequestInfo | None = None
        status, sent = "499", 0  # until an answer is made: the client went away
        try:
            work = call(decode(await request.read()))
            # the method's first step now: most finish in it (runtime.eager)
            finished, value = first_step(work) if eager else (False, work)
            if finished:
                result = value
            elif timeout is None:
                result = await value
            else:
                try:
                    result = await deadlines.run(timeout, value)
                except Expired:
                    raise timed_out(timeout) from None
            body = encode(result)
            status, sent = "200", len(body)
            return answer(body)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            info = _request_info(name, request)
            resp = failure(exc, request, info.id)
            status, sent = str(resp.status), resp.body_length or resp.content_length or 0
            return resp
        finally:
            leave(series, start, "http", name, status, received, sent,
                  info if info is not None else lambda: _request_info(name, request))

    return handle


def compile_stream_handler(endpoint: HttpEndpoint) -> Handler | None:
    """The compiled handler of a streaming API (None when it needs a Context or tracing).

    The general handler made a `Context` with its lock and temp dirs, a `Ticket` and a
    `RequestInfo` per stream: 90k instructions a stream against bare aiohttp's, when a
    chunk costs 4k (bench/instructions.py --api tokens). This one admits inline as the
    unary handler does and hands the chunks to `HttpEndpoint.stream`, which frames and
    writes them exactly as for the general handler (first-chunk errors as a status,
    later ones as an error event).
    """
    api = endpoint.api
    runtime = endpoint.runtime
    if api.context_param is not None or runtime.tracing is not None or not runtime.ready:
        return None
    admission = runtime.admission
    general = endpoint.handle
    taken = _taken(endpoint)
    failure = endpoint.failure
    decode = endpoint.decoder.json_decoder()
    stream = endpoint.stream
    series = admission.series("http", api.name)
    enter, leave = admission.enter, admission.leave
    name = api.name

    async def handle_stream(request: web.Request) -> web.StreamResponse:
        received = taken(request)
        if received < 0:
            return await general(request)
        start = enter(series)
        info: RequestInfo | None = None
        resp: web.StreamResponse | None = None
        try:
            resp = await stream(request, decode(await request.read()), None)
            return resp
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            info = _request_info(name, request)
            resp = failure(exc, request, info.id)
            return resp
        finally:
            if resp is None:  # cancelled: the client went away
                status, sent = "499", 0
            else:
                status, sent = str(resp.status), resp.body_length or resp.content_length or 0
            leave(series, start, "http", name, status, received, sent,
                  info if info is not None else lambda: _request_info(name, request))

    return handle_stream


def _json_response(body: bytes) -> web.Response:
    return web.Response(body=body, headers=_JSON_HEADERS)


def _taken(endpoint: HttpEndpoint) -> Callable[[web.Request], int]:
    """What a compiled handler takes: the request's body length when it is a plain JSON
    body and nothing refuses it now, else -1 (the general handler answers it, refusals
    included: draining, the concurrency limit, a runtime not ready)."""
    plain_json_length = endpoint.plain_json_length
    runtime = endpoint.runtime
    admission = runtime.admission
    limit = admission.limit

    def taken(request: web.Request) -> int:
        received = plain_json_length(request)
        if (received < 0 or admission.draining or (limit and admission.in_flight >= limit)
                or not runtime.ready):
            return -1
        return received

    return taken


def _request_info(name: str, request: web.Request) -> RequestInfo:
    """A compiled request's RequestInfo, made only for an error or an access line."""
    return RequestInfo("http", name, Headers(request.headers), lambda: request.remote)

