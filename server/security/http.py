"""HTTP bearer auth and CORS, installed only when configured (the default app has
neither, so the default hot path pays nothing for them)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiohttp import web

from ..http.responses import error_response
from ..http.websocket_route import AUTH_REFUSAL
from ..settings import Settings
from ..wire.websocket_protocol import token_of
from .bearer import CONTRACT_PATHS, DOCS_PAGE_PATHS, HEALTH_PATHS, METRICS_PATH, BearerAuth

log = logging.getLogger("tensorwire.http")

CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type, Accept, X-Request-ID"
CORS_EXPOSE = "X-Request-ID, Retry-After, Content-Disposition"
CORS_MAX_AGE = "600"


def secure_app(app: web.Application, settings: Settings) -> None:
    """Install on a new app what the settings ask for: bearer auth and CORS."""
    if settings.auth_token:
        app.middlewares.append(auth_middleware(
            BearerAuth(settings.auth_token),
            open_paths(settings.auth_open_health, settings.auth_open_metrics,
                       settings.auth_open_docs)))
    if settings.cors_origins:
        Cors(settings.cors_origins).install(app)


def auth_middleware(auth: BearerAuth, open_paths: Iterable[str]):
    """401 (JSON error body) for any request without the right bearer token, except the
    open paths and CORS preflights (browsers send those without credentials).

    A streamed-input API's WebSocket (a handler marked `websocket`) also takes the token
    as a `bearer.<token>` subprotocol, since browsers cannot set its headers, and is
    refused after the upgrade, with close code 1008: a browser sees a close code, never
    the status of a refused handshake."""
    exempt = frozenset(open_paths)

    @web.middleware
    async def bearer_auth(request: web.Request, handler) -> web.StreamResponse:
        if (request.path in exempt or request.method == "OPTIONS"
                or auth.allows(request.headers.get("Authorization"))):
            return await handler(request)
        if getattr(request.match_info.handler, "websocket", False):
            offered = token_of(request.headers.get("Sec-WebSocket-Protocol"))
            if offered is not None and auth.allows(f"Bearer {offered}"):
                return await handler(request)
            request[AUTH_REFUSAL] = auth.refusal()
            log.info("refused unauthenticated WebSocket %s from %s", request.path,
                     request.remote)
            return await handler(request)
        log.info("refused unauthenticated %s %s from %s", request.method, request.path,
                 request.remote)
        return error_response(auth.refusal(), request.headers.get("X-Request-ID"))

    return bearer_auth


def open_paths(health: bool, metrics: bool, docs: bool = False) -> set[str]:
    """The paths served without the token: Swagger UI's page and assets always (it asks
    for the token itself), health and metrics as configured, and the contract documents
    (`/docs.json`, `/schema.json`) only with `docs`; every API call needs the token."""
    paths: set[str] = set(DOCS_PAGE_PATHS)
    if health:
        paths |= HEALTH_PATHS
    if metrics:
        paths.add(METRICS_PATH)
    if docs:
        paths |= CONTRACT_PATHS
    return paths


class Cors:
    """CORS for the configured origins (`*` for any): preflight answers and the
    `Access-Control-*` headers on every response, streamed ones included."""

    def __init__(self, origins: Iterable[str]) -> None:
        self.origins = frozenset(o.rstrip("/") for o in origins)
        self.any = "*" in self.origins

    def allowed(self, origin: str | None) -> bool:
        return bool(origin) and (self.any or origin in self.origins)

    def install(self, app: web.Application) -> None:
        app.middlewares.insert(0, self.middleware)
        app.on_response_prepare.append(self.on_prepare)

    @web.middleware
    async def middleware(self, request: web.Request, handler) -> web.StreamResponse:
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            origin = request.headers.get("Origin")
            if not self.allowed(origin):
                return web.Response(status=403, text="CORS origin not allowed")
            return web.Response(status=204, headers={
                "Access-Control-Allow-Methods": CORS_METHODS,
                "Access-Control-Allow-Headers": CORS_HEADERS,
                "Access-Control-Max-Age": CORS_MAX_AGE,
            })  # Allow-Origin and Vary are added by on_prepare
        return await handler(request)

    async def on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if not self.allowed(origin):
            return
        response.headers["Access-Control-Allow-Origin"] = "*" if self.any else origin
        response.headers["Access-Control-Expose-Headers"] = CORS_EXPOSE
        if not self.any:
            response.headers.add("Vary", "Origin")
