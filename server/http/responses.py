"""Error responses: the one error model rendered as an HTTP status and a JSON body."""

from __future__ import annotations

import orjson
from aiohttp import web

from ..errors import (
    ERROR_KIND_HEADER,
    InternalError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    TensorwireError,
    UnsupportedMediaType,
    error_kind,
)

_JSON = "application/json"

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


@web.middleware
async def error_middleware(request: web.Request, handler) -> web.StreamResponse:
    """Router and body-limit failures get the same JSON error body as API errors."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(from_http_exception(exc))
