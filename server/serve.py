"""Serving one service in one process: HTTP and gRPC on one event loop.

Start-up: load the service (model) once, bind both ports, then report ready. Shutdown
(SIGTERM/SIGINT): readiness drops first (/readyz 503, health NOT_SERVING), new requests
are refused, in-flight ones get `graceful_timeout` seconds, then the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from dataclasses import dataclass

from aiohttp import web

from .runtime import ServiceRuntime
from .sdk import ServiceSpec
from .settings import Settings

log = logging.getLogger("tensorwire.serve")


@dataclass
class Bound:
    """Where a running server listens (ports resolved when 0 was asked for)."""

    http_port: int | None
    grpc_port: int | None


class Server:
    """Both transports of one service, started and stopped together."""

    def __init__(self, spec: ServiceSpec, settings: Settings) -> None:
        self.spec = spec
        self.settings = settings
        self.runtime = ServiceRuntime(spec, settings)
        self._runner: web.AppRunner | None = None
        self._grpc = None
        self.bound = Bound(None, None)
        self._stop = asyncio.Event()

    async def start(self) -> Bound:
        s = self.settings
        await self.runtime.start()
        if s.http:
            from .http import create_app

            app = create_app(self.runtime, s)
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False,
                                         shutdown_timeout=s.graceful_timeout)
            await self._runner.setup()
            site = web.TCPSite(self._runner, s.host, s.http_port,
                               reuse_port=s.workers > 1 or None)
            await site.start()
            sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
            self.bound.http_port = sockets[0].getsockname()[1] if sockets else s.http_port
        if s.grpc:
            from .grpc import GrpcServer

            self._grpc = GrpcServer(self.runtime, s)
            self.bound.grpc_port = self._grpc.bind(s.host, s.grpc_port)
            await self._grpc.start()
            await self._grpc.set_serving(True)
        return self.bound

    def request_stop(self) -> None:
        self._stop.set()

    async def wait(self) -> None:
        await self._stop.wait()

    async def stop(self) -> None:
        """Graceful: readiness off, stop accepting, let in-flight requests finish."""
        grace = self.settings.graceful_timeout
        self.runtime.draining = True
        if self._grpc is not None:
            await self._grpc.set_serving(False)
        tasks = []
        if self._grpc is not None:
            tasks.append(self._grpc.stop(grace))
        if self._runner is not None:
            tasks.append(self._runner.cleanup())
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.runtime.close()


async def serve_forever(spec: ServiceSpec, settings: Settings, *, announce: bool = True) -> None:
    server = Server(spec, settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, server.request_stop)
    bound = await server.start()
    if announce:
        where = []
        if bound.http_port:
            where.append(f"HTTP on http://{settings.host}:{bound.http_port} "
                         f"(docs: http://{settings.host}:{bound.http_port}/docs)")
        if bound.grpc_port:
            where.append(f"gRPC on {settings.host}:{bound.grpc_port}")
        log.warning("tensorwire serving %s: %s", spec.name, "; ".join(where))
    await server.wait()
    log.warning("tensorwire: shutting down %s (grace %.0fs)", spec.name,
                settings.graceful_timeout)
    await server.stop()
