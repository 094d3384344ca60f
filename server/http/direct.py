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

What it needs of aiohttp's internals (a request's parsed head, its payload writer, the
protocol's request handler) is in `tensorwire.http.aiohttp_compat`; the tests in
tests/unit/http/test_direct.py compare the bytes with aiohttp's own answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from aiohttp import hdrs, web

from .aiohttp_compat import JsonAnswer, message_of

__all__ = ["DIRECT_KEY", "DirectRoutes", "Handler", "JsonAnswer"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: app key: the compiled handlers routed by the application -> their direct variants
DIRECT_KEY = web.AppKey("tensorwire_direct_handlers", dict)


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
        message = message_of(request)
        if message.method == "POST":
            handler = self.routes.get(message.path)
            if handler is not None and hdrs.EXPECT not in message.headers:
                return handler(request)  # type: ignore[arg-type]
        return self.fallback(request)  # type: ignore[arg-type]
