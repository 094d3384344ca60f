"""The aiohttp application: one route per API of every service, plus the contract and
health endpoints (`catalog` describes one service or several)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import orjson
from aiohttp import web

from ..runtime.hosted import Hosted
from ..runtime.service import ServiceRuntime
from ..settings import Settings
from ..telemetry import metrics
from .catalog import Catalog
from .direct import DIRECT_KEY
from .docs import docs_asset, docs_page
from .native import NativeSteps
from .request_envelope import HttpEnvelope
from .responses import json_errors, unmatched
from .websocket_route import WebSocketSteps

RUNTIME_KEY = web.AppKey("tensorwire_runtime", ServiceRuntime)


_JSON_TYPE = {"Content-Type": "application/json"}


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), headers=_JSON_TYPE)


def _add_service_routes(router: web.UrlDispatcher, service: Hosted, catalog: Catalog
                        ) -> None:
    """`/<prefix>/schema.json` and `/<prefix>/readyz` of a prefixed service: what a
    client given `http://host:port/<prefix>` reads (404 / 503 while it is unloaded)."""
    admission = service.runtime.admission

    async def schema(_: web.Request) -> web.Response:
        if not service.ready:
            return _json({"error": f"service {service.name} is not loaded"}, 404)
        return web.Response(body=catalog.service_schema(service), headers=_JSON_TYPE)

    async def readyz(_: web.Request) -> web.Response:
        if admission.draining:
            return _json({"status": "draining"}, 503)
        if service.ready:
            return _json({"status": "ready"})
        return _json({"status": "not loaded" if not service.wanted else "starting"}, 503)

    router.add_get(f"/{service.prefix}/schema.json", json_errors(schema))
    router.add_get(f"/{service.prefix}/readyz", json_errors(readyz))


def create_app(services: ServiceRuntime | Sequence[Hosted], settings: Settings | None = None,
               *, routes: Iterable[Callable[[web.UrlDispatcher, HttpEnvelope], None]] = ()
               ) -> web.Application:
    """The app of a server's services (one runtime, or several hosted services: each
    API at its route, under its service's prefix); each of `routes` adds more routes
    (another wire's, such as the Open Inference Protocol's, served through the same
    envelope) before the catch-all 404/405 route."""
    hosted = ([Hosted.of(services)] if isinstance(services, ServiceRuntime)
              else list(services))
    runtime = hosted[0].runtime
    settings = settings or hosted[0].settings
    catalog = Catalog(hosted, settings)
    # Auth and CORS are installed by `tensorwire.security.http.secure_app` when they are
    # configured: the default app has no middleware, each of which would cost every
    # request (see responses.json_errors, which gives router errors their JSON body).
    app = web.Application(client_max_size=settings.max_request_size)
    app[RUNTIME_KEY] = runtime
    envelope = HttpEnvelope(runtime)
    direct: dict[object, object] = {}
    for api, runtime in ((api, h.runtime) for h in hosted for api in h.spec.apis.values()):
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

    admission = runtime.admission

    async def get_schema(_: web.Request) -> web.Response:
        return web.Response(body=catalog.schema(), headers=_JSON_TYPE)

    async def get_openapi(_: web.Request) -> web.Response:
        return web.Response(body=catalog.openapi(), headers=_JSON_TYPE)

    async def get_docs(_: web.Request) -> web.Response:
        return docs_page(catalog.title)

    async def livez(_: web.Request) -> web.Response:
        return _json({"status": "alive"})

    async def readyz(_: web.Request) -> web.Response:
        if admission.draining:
            return _json({"status": "draining"}, 503)
        if all(h.ready for h in hosted if h.wanted):
            return _json({"status": "ready"})
        return _json({"status": "starting"}, 503)

    app.router.add_get("/schema.json", json_errors(get_schema))
    app.router.add_get("/docs.json", json_errors(get_openapi))
    app.router.add_get("/docs", json_errors(get_docs))
    app.router.add_get("/docs/static/{name}", json_errors(docs_asset))
    app.router.add_get("/livez", json_errors(livez))
    app.router.add_get("/readyz", json_errors(readyz))
    app.router.add_get("/healthz", json_errors(readyz))
    for service in hosted:
        if service.prefix:  # the service alone, as a client pointed at /<prefix> sees it
            _add_service_routes(app.router, service, catalog)
    if settings.metrics:

        async def get_metrics(_: web.Request) -> web.Response:
            body, content_type = metrics.render()
            return web.Response(body=body, headers={"Content-Type": content_type})

        app.router.add_get("/metrics", json_errors(get_metrics))
    for install in routes:
        install(app.router, envelope)
    app.router.add_route("*", "/{_unmatched:.*}", unmatched)  # last: 404 / 405 as JSON
    return app
