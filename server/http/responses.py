"""Error responses: the one error model rendered as an HTTP status and a JSON body."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong

from ..errors import (
    ERROR_KIND_HEADER,
    InternalError,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    TensorwireError,
    UnsupportedMediaType,
    error_kind,
)

_JSON = "application/json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: aiohttp's own HTTP exceptions (router, body limits) mapped into the error model.
_FROM_AIOHTTP: dict[int, type[TensorwireError]] = {
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
}


def error_response(exc: TensorwireError, request_id: str | None = None) -> web.Response:
    shown = exc if exc.public else InternalError()
    body = shown.to_dict()
    if request_id:
        body["request_id"] = request_id
    headers = {"Content-Type": _JSON, **exc.headers, ERROR_KIND_HEADER: error_kind(shown)}
    if request_id:
        headers["X-Request-ID"] = request_id
    return web.Response(status=exc.status_code, body=orjson.dumps(body), headers=headers)


def from_http_exception(exc: web.HTTPException) -> TensorwireError:
    cls = _FROM_AIOHTTP.get(exc.status)
    message = exc.reason
    if exc.status == 404:
        message = "no such route"
    elif exc.status == 413:
        message = f"request body too large: {exc.text}" if exc.text else "request body too large"
    err = (cls or InternalError)(message, status=exc.status)
    if exc.status == 405 and "Allow" in exc.headers:
        err.headers["Allow"] = exc.headers["Allow"]
    return err


def from_protocol_error(status: int, exc: BaseException | None) -> TensorwireError:
    """What aiohttp's protocol answers on its own (a request line or header its parser
    refused, or a failure no handler caught), in the error model.

    The message names the fault without quoting the client's bytes (aiohttp's own text
    echoes the offending line); a 5xx is a plain InternalError.
    """
    if isinstance(exc, TensorwireError):  # refused by tensorwire's own protocol checks
        return exc
    if status >= 500:
        return InternalError(status=status)
    if isinstance(exc, LineTooLong):
        limit = exc.args[1] if len(exc.args) > 1 else "the limit of"
        why = f"a request line or header is longer than {limit} bytes"
    elif isinstance(exc, HttpProcessingError) and exc.message:
        why = str(exc.message).split("\n", 1)[0].strip().rstrip(":")
    else:
        try:
            why = HTTPStatus(status).phrase
        except ValueError:
            why = "refused by the parser"
    cls = PayloadTooLarge if status == 413 else InvalidArgument
    return cls(f"malformed HTTP request: {why}", status=status)


def json_errors(handler: Handler) -> Handler:
    """Wrap one (non-API) route's handler: aiohttp HTTP exceptions it raises get the
    same JSON error body as API errors.

    Per route instead of an app-wide middleware: every aiohttp middleware adds two
    coroutine frames to every request (~2-4 us, 5-7% of a small JSON request;
    bench/NOTES.md), and API handlers already turn every failure into the error model.
    """

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return error_response(from_http_exception(exc))

    return wrapped


async def unmatched(request: web.Request) -> web.StreamResponse:
    """The catch-all route, registered last: what the router would have answered (404,
    or 405 with `Allow` when another route has this path), as the JSON error model."""
    allowed: set[str] = set()
    for resource in request.app.router.resources():
        if resource is request.match_info.route.resource:
            continue
        match, methods = await resource.resolve(request)
        if match is None:
            allowed |= methods
    if allowed:
        exc: web.HTTPException = web.HTTPMethodNotAllowed(request.method, allowed)
    else:
        exc = web.HTTPNotFound()
    return error_response(from_http_exception(exc))
