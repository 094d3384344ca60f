"""Compiled APIs reached without aiohttp's router, answered without its response machinery.

For a small JSON request bare aiohttp spends about as much on what surrounds a handler
as the handler itself: the router resolves the path through a coroutine and builds a
match info, the application runs its (empty) middleware chain and response signal, and
a `web.Response` assembles a header multidict, serializes it and writes head and body
through two more coroutines (bench/instructions.py counts it). A compiled API needs
none of that when the application has no middleware and no `on_response_prepare`
signal (no auth, no CORS: the default), so each connection's protocol asks
`DirectRoutes` first:

- a request whose method is POST and whose raw target is exactly a compiled API's path
  (no query, no percent-encoding, no `Expect: 100-continue` to answer) goes straight to
  that API's direct handler;
- every other request goes through the application as before (`Application._handle`),
  so routing, 404/405 answers and everything else keep aiohttp's behaviour.

A direct handler answers with `JsonAnswer`: the same bytes aiohttp writes for a JSON
`web.Response` (status line, Content-Type, Content-Length, Date, Server and the
Connection header aiohttp's keep-alive rules call for), built from a prefix made once
and written in one `transport.write`. Errors and every non-200 answer still go through
`web.Response`.

It reads three facts of aiohttp's request and protocol (`_message`, the request's
`_payload_writer` and `RequestHandler._request_handler`), as `GuardedHandler` does; the
tests in tests/unit/http/test_direct.py compare the bytes with aiohttp's own answers.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import hdrs, web
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.http import SERVER_SOFTWARE, HttpVersion10, HttpVersion11
from multidict import CIMultiDict

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: app key: the compiled handlers routed by the application -> their direct variants
DIRECT_KEY = web.AppKey("tensorwire_direct_handlers", dict)

_STATUS_200 = {HttpVersion11: b"HTTP/1.1 200 OK\r\n", HttpVersion10: b"HTTP/1.0 200 OK\r\n"}
_JSON_HEAD = b"Content-Type: application/json\r\nContent-Length: "
#: above this a body is written after its head rather than copied behind it
_JOIN_LIMIT = 1 << 16
_SERVER = f"\r\nServer: {SERVER_SOFTWARE}\r\n".encode()


class _Clock:
    """The Date and Server header lines, remade once a second (aiohttp caches its
    formatted date the same way)."""

    __slots__ = ("lines", "second")

    def __init__(self) -> None:
        self.second = -1
        self.lines = b""

    def date_lines(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.lines = b"\r\nDate: " + rfc822_formatted_time().encode() + _SERVER
        return self.lines


_clock = _Clock()


class JsonAnswer(web.StreamResponse):
    """A 200 JSON answer written as aiohttp would write `web.Response(body=body,
    content_type="application/json")`, in one write and without a header multidict.

    aiohttp's protocol only calls `prepare`, `write_eof` and reads `keep_alive`; the
    class defaults of `StreamResponse` cover the rest, and `headers` is made on demand
    for any code that looks.
    """

    _status = 200
    _reason = "OK"

    def __init__(self, body: bytes) -> None:  # no super(): nothing here needs its state
        self._body = body
        self._state: dict[Any, Any] = {}

    @property
    def content_length(self) -> int:  # type: ignore[override]
        """The body's length, read by the envelope's accounting before the answer is
        written (without making the header multidict)."""
        return len(self._body)  # type: ignore[arg-type]

    @property
    def _headers(self) -> CIMultiDict[str]:  # type: ignore[override]
        headers: CIMultiDict[str] = CIMultiDict()
        headers[hdrs.CONTENT_TYPE] = "application/json"
        headers[hdrs.CONTENT_LENGTH] = str(len(self._body or b""))
        return headers

    async def prepare(self, request: web.BaseRequest) -> Any:
        if self._eof_sent:
            return None
        body: bytes = self._body  # type: ignore[assignment]
        message = request._message
        keep_alive = not message.should_close
        self._keep_alive = keep_alive
        version = message.version
        if version == HttpVersion11:
            tail = b"\r\n" if keep_alive else b"Connection: close\r\n\r\n"
        elif version == HttpVersion10:
            tail = b"Connection: keep-alive\r\n\r\n" if keep_alive else b"\r\n"
        else:  # the parser accepts only HTTP/1.x; kept general all the same
            tail = b"\r\n" if keep_alive else b"Connection: close\r\n\r\n"
        status = _STATUS_200.get(version) or f"HTTP/{version[0]}.{version[1]} 200 OK\r\n".encode()
        head = b"%s%s%d%s%s" % (status, _JSON_HEAD, len(body), _clock.date_lines(), tail)
        writer = request._payload_writer
        transport = request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("Cannot write to closing transport")
        self._eof_sent = True
        self._body_length = len(body)
        writer.output_size += len(head) + len(body)  # type: ignore[attr-defined]
        if len(body) < _JOIN_LIMIT:
            transport.write(head + body)
        else:  # a large answer: no copy, and the handler waits while the buffer drains
            transport.write(head)
            transport.write(body)
            await writer.drain()  # type: ignore[attr-defined]
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None


class DirectRoutes:
    """Which requests skip the router: a compiled API's exact path, POST, nothing to
    answer before the body (see the module docstring)."""

    def __init__(self, routes: Mapping[str, Handler], fallback: Handler) -> None:
        self.routes = dict(routes)
        self.fallback = fallback

    @classmethod
    def of(cls, app: web.Application, fallback: Handler) -> DirectRoutes | None:
        """The direct routes of a set-up `app` (None when it has none, or when a
        middleware or a response signal must see every request)."""
        direct: dict[Handler, Handler] = app.get(DIRECT_KEY, {})
        if not direct or app.middlewares or len(app.on_response_prepare):
            return None
        routes: dict[str, Handler] = {}
        for resource in app.router.resources():
            if not isinstance(resource, web.PlainResource):
                continue
            for route in resource:
                if route.method == hdrs.METH_POST and route.handler in direct:
                    routes[resource.canonical] = direct[route.handler]
        return cls(routes, fallback) if routes else None

    def __call__(self, request: web.BaseRequest) -> Awaitable[web.StreamResponse]:
        message = request._message
        if message.method == "POST":
            handler = self.routes.get(message.path)
            if handler is not None and hdrs.EXPECT not in message.headers:
                return handler(request)  # type: ignore[arg-type]
        return self.fallback(request)  # type: ignore[arg-type]
