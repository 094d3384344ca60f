"""`tensorwire.http.app.create_app`: the routes of one service's app (its APIs, the
contract documents, Swagger UI, probes, metrics when on, another wire's routes) with the
catch-all 404/405 last, and the probes following the runtime's state."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import tensorwire
from tensorwire.errors import ERROR_KIND_HEADER
from tensorwire.http.app import RUNTIME_KEY, create_app
from tensorwire.http.direct import DIRECT_KEY
from tensorwire.http.request_envelope import HttpEnvelope
from tensorwire.http.schema import openapi, schema_json
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings


@tensorwire.service
class Small:
    @tensorwire.api
    def add(self, a: int, b: int = 1) -> int:
        return a + b

    @tensorwire.api
    def echo(self, text: str) -> str:
        return text


@asynccontextmanager
async def _serving(runtime: ServiceRuntime, settings: Settings | None = None,
                   routes: tuple[Callable[[web.UrlDispatcher, HttpEnvelope], None], ...] = ()
                   ) -> AsyncIterator[TestClient]:
    app = create_app(runtime, settings, routes=routes)
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = ServiceRuntime(tensorwire.get_service_spec(Small), Settings())
    await runtime.start()  # the app is made of the plans `start` makes
    try:
        yield runtime
    finally:
        await runtime.close()


async def test_each_api_is_a_post_route_answered_through_the_envelope(
        runtime: ServiceRuntime) -> None:
    async with _serving(runtime) as client:
        response = await client.post("/add", json={"a": 2})
        assert (response.status, await response.json()) == (200, 3)
        response = await client.post("/echo", json={"text": "hi"})
        assert await response.text() == "hi"
        app = client.server.app
        assert app is not None and app[RUNTIME_KEY] is runtime
        # each API's handler has its variant past the router
        handlers = {r.handler for r in app.router.routes() if r.method == "POST"}
        assert set(app[DIRECT_KEY]) == handlers and len(handlers) == 2


async def test_the_probes_follow_the_runtime(runtime: ServiceRuntime) -> None:
    async with _serving(runtime) as client:
        for path in ("/readyz", "/healthz"):
            response = await client.get(path)
            assert (response.status, await response.json()) == (200, {"status": "ready"})
        runtime.ready = False  # as before `start` ends, or once `close` began
        for path in ("/readyz", "/healthz"):
            response = await client.get(path)
            assert (response.status, await response.json()) == (503, {"status": "starting"})
        runtime.ready = True
        runtime.admission.draining = True
        response = await client.get("/readyz")
        assert (response.status, await response.json()) == (503, {"status": "draining"})
        response = await client.get("/livez")  # alive while it drains
        assert (response.status, await response.json()) == (200, {"status": "alive"})


async def test_the_contract_documents_are_the_service_s(runtime: ServiceRuntime) -> None:
    settings = Settings(root_path="/models/small")
    async with _serving(runtime, settings) as client:
        response = await client.get("/schema.json")
        assert response.headers["Content-Type"] == "application/json"
        assert await response.read() == orjson.dumps(schema_json(runtime.spec))
        response = await client.get("/docs.json")
        assert await response.read() == orjson.dumps(
            openapi(runtime.spec, auth=False, open_health=settings.auth_open_health,
                    root_path="/models/small"))
        assert (await response.json())["servers"] == [{"url": "/models/small"}]
        page = await client.get("/docs")
        assert page.status == 200 and page.content_type == "text/html"
        assert (await client.get("/docs/static/swagger-ui.css")).status == 200


async def test_a_missing_asset_is_the_json_404(runtime: ServiceRuntime) -> None:
    async with _serving(runtime) as client:
        response = await client.get("/docs/static/missing.js")
        assert response.status == 404
        assert await response.json() == {"error": "no such route"}


@pytest.mark.parametrize("on", [True, False])
async def test_metrics_are_served_only_when_on(runtime: ServiceRuntime, on: bool) -> None:
    async with _serving(runtime, Settings(metrics=on)) as client:
        response = await client.get("/metrics")
        if on:
            assert response.status == 200
            assert response.content_type == "text/plain"
        else:
            assert response.status == 404
            assert response.headers[ERROR_KIND_HEADER] == "NotFound"


async def test_another_wire_s_routes_come_before_the_catch_all(runtime: ServiceRuntime
                                                               ) -> None:
    seen: list[Any] = []

    def install(router: web.UrlDispatcher, envelope: HttpEnvelope) -> None:
        seen.append(envelope)

        async def extra(_: web.Request) -> web.Response:
            return web.json_response({"wire": "other"})

        router.add_get("/v9/extra", extra)

    async with _serving(runtime, routes=(install,)) as client:
        assert await (await client.get("/v9/extra")).json() == {"wire": "other"}
        assert len(seen) == 1 and isinstance(seen[0], HttpEnvelope)
        response = await client.get("/nowhere")
        assert (response.status, await response.json()) == (404, {"error": "no such route"})
        response = await client.get("/add")
        assert response.status == 405 and response.headers["Allow"] == "POST"
        assert (await response.json())["error"] == "Method Not Allowed"
