"""The one HTTP envelope: what every API request goes through, native or Open Inference
Protocol, unary or streamed.

grpclib serves every method with one request handler; here `HttpEnvelope.handler` makes
that handler for each route, and an `HttpRoute` says what is particular to one API on
one wire: how a request becomes validated arguments (`read`, or for a plain JSON object
body `decode_json` straight from its bytes), and how a result becomes a response
(`answer`, or `stream` for a generator API). Everything around them is written once,
here:

- admission: a request while the server drains, over `max_concurrency` or not ready is
  refused (503 + Retry-After) and counted;
- the API's request plan (`tensorwire.runtime.plan`): the method's call under its time
  limit, a `Context` only for an API that needs one, the chunks of a stream;
- cancellation (a client that hangs up cancels its handler: `handler_cancellation`),
  the metrics series, the access line (its request id and peer made only when a line
  is written or an error answered), the tracing span (`--tracing`), and the failure
  mapping (`failure`: the error model's status and JSON body, `route.error` rendering
  it: the Open Inference Protocol answers every invalid argument 400).

`handler` is the one request handler, compiled per route. A call that is no
request/response (the WebSocket of a streamed-input API, `tensorwire.http.websocket_route`)
is served by its own handler made of the same pieces: `refusal`, `begin`, `end` and
`error_of`, which the compiled handler inlines or calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any

from aiohttp import web

from ..context import Context, Headers, RequestInfo
from ..errors import Cancelled, TensorwireError, as_error
from ..runtime.plan import RequestPlan
from ..runtime.service import ServiceRuntime
from ..telemetry.metrics import Series
from .aiohttp_compat import JsonAnswer
from .direct import Handler
from .responses import error_response, from_http_exception

log = logging.getLogger("tensorwire.http")

#: A response, or the coroutine that makes one (a body streamed from a file, say).
Answer = web.StreamResponse | Awaitable[web.StreamResponse]

#: Status codes as the metrics and access lines label them, made once.
_LABELS = {code: str(code) for code in range(100, 600)}
_JSON_HEADERS = (("Content-Type", "application/json"),)


def _json_response(body: bytes) -> web.Response:
    """A plain 200 JSON answer through aiohttp's response machinery (routed requests:
    middleware and response signals see it)."""
    return web.Response(body=body, headers=_JSON_HEADERS)


@dataclass(eq=False)
class HttpRoute:
    """One API on one HTTP wire: its plan, and how its requests read and answer."""

    #: The API's (or v2 model's) name: metrics, access lines, logs.
    name: str
    plan: RequestPlan
    #: (request, decode scope) -> (validated keyword arguments, what `answer` needs to
    #: know of the request, or None). None for a route whose handler is not `handler`.
    read: Callable[[web.Request, Any], Awaitable[tuple[dict[str, Any], Any]]] | None = None
    #: (result, request, Context or None, what `read` kept) -> the response.
    answer: Callable[[Any, web.Request, Context | None, Any], Answer] | None = None
    #: (request, arguments, Context or None) -> the streamed response (generator APIs).
    stream: Callable[[web.Request, dict[str, Any], Context | None],
                     Awaitable[web.StreamResponse]] | None = None
    #: The common case, decided without a coroutine: the body's length when it is a
    #: plain JSON object `decode_json` reads straight from its bytes, else -1.
    plain_length: Callable[[web.Request], int] | None = None
    decode_json: Callable[[bytes], dict[str, Any]] | None = None
    #: The JSON bytes of a result, when every answer of the route is a plain 200 JSON
    #: body (no Context to set a status or headers, no Accept to honour): the envelope
    #: then answers them itself (`JsonAnswer` past the router) and `answer` is unused.
    json_encode: Callable[[Any], bytes] | None = None
    #: How an error is rendered (the error model's JSON body by default).
    error: Callable[[TensorwireError, str | None], web.Response] = error_response
    #: Names what failed in the log (`v2 <model>` for the Open Inference Protocol).
    what: str = ""
    #: The route's metrics series (set by the envelope; None with metrics off).
    series: Series | None = None
    #: Whether its successful requests' decode, compute and encode times are measured
    #: (Triton's statistics: the v2 routes; two clock reads a request).
    timed: bool = False

    def __post_init__(self) -> None:
        self.what = self.what or self.name


def request_info(name: str, request: web.Request) -> RequestInfo:
    """A request's RequestInfo: headers, peer and request id all read lazily."""
    return RequestInfo("http", name, Headers(request.headers), lambda: request.remote)


class HttpEnvelope:
    """Admission, plan, cancellation, metrics, access line, span and failure mapping of
    every API request of one worker (see the module docstring)."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        """`runtime`: any runtime of the server (they share its admission and tracing);
        each route's own plan says whether its API is ready and runs its calls."""
        self.runtime = runtime
        self.admission = runtime.admission
        self.tracing = runtime.tracing

    def route(self, route: HttpRoute, method: str | None = None,
              path: str | None = None) -> HttpRoute:
        """Register `route`: its metrics series and, for an API's own route, how access
        lines and spans name it."""
        if method is not None and path is not None:
            self.admission.describe("http", route.name, method, path)
        route.series = self.admission.series("http", route.name)
        return route

    @staticmethod
    def error_of(route: HttpRoute, exc: Exception, request: web.Request,
                 request_id: str) -> TensorwireError:
        """What handling `request` raised, in the error model, logged when it is not
        the client's fault (aiohttp's own redirects, below 400, are raised on)."""
        if isinstance(exc, TensorwireError):
            if not exc.public:
                log.error("%s %s failed [%s]: %s", request.method, request.path,
                          request_id, exc.message)
            return exc
        if isinstance(exc, web.HTTPException):  # aiohttp's own, e.g. 413 from read()
            if exc.status < 400:
                raise exc
            return from_http_exception(exc)
        if isinstance(exc, ConnectionError):  # the client left mid-request (mid-upload)
            log.info("%s %s: client went away [%s]: %s", request.method, request.path,
                     request_id, exc)
            return Cancelled()
        log.error("%s %s (%s) failed [%s]", request.method, request.path, route.what,
                  request_id, exc_info=exc)
        return as_error(exc)

    @classmethod
    def failure(cls, route: HttpRoute, exc: Exception, request: web.Request,
                request_id: str) -> web.Response:
        """The answer to what handling `request` raised (`error_of`, rendered)."""
        return route.error(cls.error_of(route, exc, request, request_id), request_id)

    def refusal(self, route: HttpRoute, request: web.Request) -> TensorwireError | None:
        """What refuses a request now (draining, over the concurrency limit, not
        ready), recorded as answered; None to admit it."""
        admission = self.admission
        if not (admission.draining or (admission.limit and admission.in_flight >= admission.limit)
                or not route.plan.ready):
            return None
        return self._refusal(route, request)[0]

    def begin(self, route: HttpRoute, request: web.Request
              ) -> tuple[float, RequestInfo, Context | None, Any]:
        """Count an admitted request in: its start, RequestInfo, Context (when its
        plan needs one) and tracing span."""
        start = self.admission.enter(route.series)
        info = request_info(route.name, request)
        ctx = route.plan.context(info) if route.plan.needs_context else None
        return start, info, ctx, self.tracing.start(info) if self.tracing is not None else None

    def end(self, route: HttpRoute, start: float, status: int, received: int, sent: int,
            info: RequestInfo, ctx: Context | None, span: Any) -> None:
        """Count it out: its Context closed, metrics, access line, span."""
        if ctx is not None:
            ctx.close()
        self.admission.leave(route.series, start, "http", route.name,
                             _LABELS.get(status) or str(status), received, sent, info)
        if span is not None:  # after the access line, which reads its trace id
            span.finish(status)

    def handler(self, route: HttpRoute, *, direct: bool = False) -> Handler:
        """The aiohttp handler of `route` (`direct`: the variant for requests
        `tensorwire.http.direct` hands over past the router, whose plain JSON answers
        are `JsonAnswer`s written whole).

        One coroutine frame on purpose: each extra layer on this path cost about a
        microsecond a request in bench/http_json.py (bare aiohttp's handler has two).
        """
        admission, tracing = self.admission, self.tracing
        enter, leave = admission.enter, admission.leave
        plan, name, series = route.plan, route.name, route.series
        read, stream, answer = route.read, route.stream, route.answer
        assert read is not None and answer is not None, f"{name} has no request steps"
        encode = route.json_encode
        json_answer: Callable[[bytes], web.StreamResponse] = (
            JsonAnswer if direct else _json_response)
        plain_length, decode_json = route.plain_length, route.decode_json
        needs_context = plan.needs_context
        #: whether a request makes its RequestInfo up front (for its Context or span)
        prelude = needs_context or tracing is not None
        failure = self.failure
        clock, timed = perf_counter, route.timed

        async def handle(request: web.Request) -> web.StreamResponse:
            if (admission.draining or (admission.limit and admission.in_flight >= admission.limit)
                    or not plan.ready):
                return self._refuse(route, request)
            received = plain_length(request) if plain_length is not None else -1
            start = enter(series)
            owner = plan.owner  # counts the call: an unload waits for its runtime's calls
            owner.calls += 1
            info: RequestInfo | None = None
            ctx: Context | None = None
            span = resp = status = kept = None
            sent = 0
            ran = done = 0.0  # when the plan's call began and ended (timed routes)
            try:
                if prelude:
                    info = request_info(name, request)
                    if needs_context:
                        ctx = plan.context(info)
                    if tracing is not None:
                        span = tracing.start(info)
                if received >= 0:  # a plain JSON object, read straight from its bytes
                    kwargs = decode_json(await request.read())  # type: ignore[misc]
                else:
                    received = request.content_length or 0
                    kwargs, kept = await read(request, plan.scope if ctx is None else ctx)
                if span is not None:
                    span.decoded()
                if stream is not None:
                    resp = await stream(request, kwargs, ctx)
                    return resp
                if timed:
                    ran = clock()
                finished, value = plan.run(kwargs, ctx, None)
                result = value if finished else await value
                if timed:
                    done = clock()
                if span is not None:
                    span.encoding()
                if encode is not None:  # the common answer: JSON bytes, 200
                    body = encode(result)
                    status, sent = "200", len(body)
                    resp = json_answer(body)
                    return resp
                made = answer(result, request, ctx, kept)
                resp = made if isinstance(made, web.StreamResponse) else await made
                return resp
            except asyncio.CancelledError:
                if ctx is not None:
                    ctx.cancel()
                raise
            except Exception as exc:
                if ctx is not None:
                    ctx.cancel()  # a `def` method still running may poll it and stop
                if info is None:
                    info = request_info(name, request)
                resp = failure(route, exc, request, info.id)
                return resp
            finally:
                owner.calls -= 1
                if ctx is not None:
                    ctx.close()
                if resp is None:  # cancelled: the client went away
                    status, sent = "499", 0
                elif status is None:  # not the plain answer above: read off the response
                    status = _LABELS.get(resp.status) or str(resp.status)
                    sent = resp.body_length or resp.content_length or 0
                leave(series, start, "http", name, status, received, sent,
                      info if info is not None else lambda: request_info(name, request),
                      ran, done)
                if span is not None:  # after the access line, which reads its trace id
                    span.finish(499 if resp is None else resp.status)

        return handle

    def _refuse(self, route: HttpRoute, request: web.Request) -> web.Response:
        """The answer to a request refused before it began (recorded as answered)."""
        error, info = self._refusal(route, request)
        return route.error(error, info.id)

    def _refusal(self, route: HttpRoute, request: web.Request
                 ) -> tuple[TensorwireError, RequestInfo]:
        """What refuses a request now (recorded as answered), with its RequestInfo."""
        info = request_info(route.name, request)
        error = self.admission.refusal() or route.plan.refusal
        self.admission.refused("http", route.name, info, error)
        return error, info
