"""The aiohttp application: one route per API plus the contract and health endpoints."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import orjson
from aiohttp import web

from ..runtime.service import ServiceRuntime
from ..settings import Settings
from ..telemetry import metrics
from .direct import DIRECT_KEY
from .docs import docs_asset, docs_page
from .native import NativeSteps
from .request_envelope import HttpEnvelope
from .responses import json_errors, unmatched
from .schema import openapi, schema_json
from .websocket import WebSocketSteps

RUNTIME_KEY = web.AppKey("tensorwire_runtime", ServiceRuntime)


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload),
                        headers={"Content-Type": "application/json"})


def create_app(runtime: ServiceRuntime, settings: Settings | None = None, *,
               routes: Iterable[Callable[[web.UrlDispatcher, HttpEnvelope], None]] = ()
               ) -> web.Application:
    """The app of one service; each of `routes` adds more routes (another wire's, such
    as the Open Inference Protocol's, served through the same envelope) before the
    catch-all 404/405 route."""
    settings = settings or runtime.settings
    spec = runtime.spec
    # Auth and CORS are installed by `tensorwire.security.http.secure_app` when they are
    # configured: the default app has no middleware, each of which would cost every
    # request (see responses.json_errors, which gives router errors their JSON body).
    app = web.Application(client_max_size=settings.max_request_size)
    app[RUNTIME_KEY] = runtime
    envelope = HttpEnvelope(runtime)
    direct: dict[object, object] = {}
    for api in spec.apis.values():
        if api.stream_input is not None:  # a WebSocket on the API's route (GET upgrade)
            socket = WebSocketSteps(api, runtime, settings).handler(envelope)
            app.router.add_get(api.route, socket, allow_head=False)
            app.router.add_post(api.route, socket)  # 426: it takes a WebSocket
            continue
        route = NativeSteps(api, runtime, settings).route(envelope)
        handler = envelope.handler(route)
        app.router.add_post(api.route, handler)
        direct[handler] = envelope.handler(route, direct=True)
    app[DIRECT_KEY] = direct  # used by the server's protocol when nothing wraps the routes

    schema_body = orjson.dumps(schema_json(spec))
    openapi_body = orjson.dumps(openapi(spec, auth=bool(settings.auth_token),
                                        open_health=settings.auth_open_health,
                                        root_path=settings.root_path))

    async def get_schema(_: web.Request) -> web.Response:
        return web.Response(body=schema_body, headers={"Content-Type": "application/json"})

    async def get_openapi(_: web.Request) -> web.Response:
        return web.Response(body=openapi_body, headers={"Content-Type": "application/json"})

    async def get_docs(_: web.Request) -> web.Response:
        return docs_page(spec.name)

    async def livez(_: web.Request) -> web.Response:
        return _json({"status": "alive"})

    async def readyz(_: web.Request) -> web.Response:
        if runtime.ready and not runtime.draining:
            return _json({"status": "ready"})
        return _json({"status": "draining" if runtime.draining else "starting"}, 503)

    app.router.add_get("/schema.json", json_errors(get_schema))
    app.router.add_get("/docs.json", json_errors(get_openapi))
    app.router.add_get("/docs", json_errors(get_docs))
    app.router.add_get("/docs/static/{name}", json_errors(docs_asset))
    app.router.add_get("/livez", json_errors(livez))
    app.router.add_get("/readyz", json_errors(readyz))
    app.router.add_get("/healthz", json_errors(readyz))
    if settings.metrics:

        async def get_metrics(_: web.Request) -> web.Response:
            body, content_type = metrics.render()
            return web.Response(body=body, headers={"Content-Type": content_type})

        app.router.add_get("/metrics", json_errors(get_metrics))
    for install in routes:
        install(app.router, envelope)
    app.router.add_route("*", "/{_unmatched:.*}", unmatched)  # last: 404 / 405 as JSON
    return app
