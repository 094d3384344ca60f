"""Serving a server's services in one process: HTTP and gRPC on one event loop.

A server holds one service or several (`tensorwire serve a:A b:B`); each has its own
runtime (its instance, threads, batchers: `tensorwire.runtime.hosted`), and they share
one HTTP app, one gRPC server and one admission gate, so `max_concurrency` and the drain
count every request of the worker, whichever service it calls.

Start-up: load the services (models) once, bind both ports, then report ready. Shutdown
(SIGTERM/SIGINT): readiness drops first (/readyz 503, health NOT_SERVING) while the
ports stay open, so probes and load balancers see it; new API requests are refused
(503 / UNAVAILABLE); in-flight ones, streams included, get `graceful_timeout` seconds;
then both servers close and the process exits 0.

With several workers each process runs one `Server` with SO_REUSEPORT on the same ports
(`tensorwire.ops.supervisor` supervises them).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from aiohttp import web

from .. import inference
from ..compose.serving import Dependencies
from ..contract.descriptor import ServiceSpec
from ..grpc import GrpcServer
from ..grpc.server import ExtraService
from ..http import create_app
from ..http.aiohttp_compat import site_sockets
from ..http.connections import runner as http_runner
from ..runtime.admission import Admission
from ..runtime.control import ModelControl
from ..runtime.hosted import Hosted, Placement
from ..runtime.service import ServiceRuntime
from ..security.grpc import interceptors
from ..security.http import secure_app
from ..security.tls import grpc_credentials, http_context
from ..settings import Settings
from ..telemetry.tracing import Tracing
from ..v2 import Repository, V2Routes, V2Servicer
from . import loops
from .https_site import HTTPSSite
from .ports import cannot_listen, check_free

log = logging.getLogger("tensorwire.serve")

#: Seconds the servers get to close connections once the drain is over.
CLOSE_TIMEOUT = 1.0


@dataclass
class Bound:
    """Where a running server listens (ports resolved when 0 was asked for)."""

    http_port: int | None
    grpc_port: int | None


class Server:
    """Both transports of the server's services, started and stopped together.

    `services`: one service, or (service, `Placement`) pairs: each service's prefix,
    own settings and whether it starts loaded, in the order they were named.
    """

    def __init__(self, services: ServiceSpec | Sequence[tuple[ServiceSpec, Placement]],
                 settings: Settings) -> None:
        placed = ([(services, Placement())] if isinstance(services, ServiceSpec)
                  else list(services))
        self.settings = settings
        #: The one gate of every request, whichever service it calls.
        self.admission = Admission(settings)
        self.tracing = Tracing.from_settings(settings, " + ".join(s.name for s, _ in placed),
                                             self.admission.routes)
        if self.tracing is not None:
            self.admission.trace_id = self.tracing.trace_id
        self.services = [Hosted(spec, settings, placement, self.admission, self.tracing)
                         for spec, placement in placed]
        #: The first service (the only one, usually).
        self.spec = self.services[0].declared
        #: Where the services' dependencies run, and the order the services start in.
        self.dependencies = Dependencies(self.services, settings, self.admission,
                                         self.tracing)
        #: Loads and unloads services at run time (`--model-control explicit`).
        self.control = ModelControl(self.services, enabled=settings.model_control == "explicit",
                                    grace=settings.graceful_timeout,
                                    draining=lambda: self.admission.draining)
        self.control.listeners.append(self._changed)
        #: With several workers: tells the supervisor of a change this worker made, so
        #: that the others follow (`tensorwire.ops.worker`); None with one worker.
        self.relay: Callable[[str, str], None] | None = None
        self._following: set[asyncio.Future[None]] = set()
        #: Changes other workers made while this one was still starting (made once it
        #: has: a change made mid-start would be undone by the start's own loading).
        self._early: list[tuple[str, str]] | None = []
        self._runner: web.AppRunner | None = None
        self._grpc = None
        #: The Open Inference Protocol's models and shared-memory regions (None: off).
        self.v2: Repository | None = None
        self.bound = Bound(None, None)
        self._stop = asyncio.Event()

    async def start(self) -> Bound:
        s = self.settings
        shared = s.workers > 1  # SO_REUSEPORT only when several workers share the ports
        if not shared:  # a port in use is told before the model loads, in one line
            # (several workers: their supervisor checked, and holds the ports)
            if s.http:
                check_free("HTTP", s.host, s.http_port)
            if s.grpc:
                check_free("gRPC", s.host, s.grpc_port)
        await self._load_services()
        # The Open Inference Protocol on both ports, over the same runtimes: the same
        # admission, limits, batching and security as the native routes.
        v2 = self.v2 = (Repository(self.services,
                                   self.control if self.control.enabled else None)
                        if s.v2 else None)
        if s.http:
            routes = [V2Routes(v2, s).install] if v2 is not None else []
            app = create_app(self.services, s, routes=routes)
            secure_app(app, s)
            # The drain waits for API requests itself; closing then only needs a moment.
            # handler_cancellation: a client that hangs up cancels its handler, as a
            # cancelled gRPC call does, so its work stops (a queued batch item leaves
            # the queue) instead of running for nobody.
            # http_runner: connection limits and bounded inflation (tensorwire.http.connections)
            self._runner = http_runner(app, s, access_log=None, handle_signals=False,
                                       shutdown_timeout=CLOSE_TIMEOUT,
                                       handler_cancellation=True)
            await self._runner.setup()
            tls = http_context(s)
            site = (web.TCPSite(self._runner, s.host, s.http_port,
                                reuse_port=True if shared else None) if tls is None else
                    # plain HTTP to the TLS port gets a readable 400, not a dropped line
                    HTTPSSite(self._runner, s.host, s.http_port, ssl_context=tls,
                              reuse_port=True if shared else None,
                              first_byte_wait=s.header_timeout))
            try:
                await site.start()
            except OSError as exc:
                raise cannot_listen("HTTP", s.host, s.http_port,
                                    str(exc.strerror or exc)) from exc
            sockets = site_sockets(site)
            self.bound.http_port = sockets[0].getsockname()[1] if sockets else s.http_port
        if s.grpc:
            extra = [ExtraService(inference.SERVICE_NAME, V2Servicer(v2).handler,
                                  inference.add_to_pool)] if v2 is not None else []
            self._grpc = GrpcServer(self.services, s, interceptors(s), extra)
            try:
                self.bound.grpc_port = self._grpc.bind(s.host, s.grpc_port,
                                                       grpc_credentials(s))
            except (OSError, RuntimeError) as exc:  # grpcio raises RuntimeError for it
                if not shared:  # grpcio's message only says "Failed to bind": ask why
                    check_free("gRPC", s.host, s.grpc_port)
                raise cannot_listen("gRPC", s.host, s.grpc_port, str(exc)) from exc
            await self._grpc.start()
            await self._grpc.set_serving(True)
        early, self._early = self._early, None
        for op, name in early or ():
            self.follow(op, name)
        return self.bound

    @property
    def runtime(self) -> ServiceRuntime:
        """The first service's runtime (the only one, usually)."""
        return self.services[0].runtime

    def want(self, loaded: Mapping[str, bool]) -> None:
        """Before `start`: which services to load, by name (the others' `load` option
        stands): what a worker started after the others changed it is told."""
        for service in self.services:
            service.wanted = loaded.get(service.name, service.wanted)

    def follow(self, op: str, name: str) -> None:
        """Make a change another worker made (on this loop; see ModelControl.follow);
        one told while this worker is starting is made once it has started."""
        if self._early is not None:
            self._early.append((op, name))
            return
        task = asyncio.ensure_future(self.control.follow(op, name))
        self._following.add(task)  # held until done (the loop keeps weak references)
        task.add_done_callback(self._following.discard)

    async def _changed(self, op: str, service: Hosted, followed: bool) -> None:
        """A service was loaded or unloaded: gRPC health and reflection follow (the
        HTTP documents read the services' state themselves); the other workers are told
        of what this one did."""
        if self._grpc is not None:
            await self._grpc.set_serving(not self.admission.draining)
        if self.relay is not None and not followed:
            self.relay(op, service.name)

    async def _load_services(self) -> None:
        """Start every service that is to be loaded, in order; if one fails, those
        started are closed again and the failure (InitFailure) goes on. The others'
        APIs answer that they are not loaded."""
        started: list[Hosted] = []
        try:
            for service in self.dependencies.order:  # dependencies first
                if not service.wanted:
                    for plan in service.plans.values():
                        plan.unbind(ModelControl.unloaded(service))
                    continue
                self.dependencies.before(service)
                await service.start()
                self.dependencies.after(service)
                started.append(service)
        except BaseException:
            for service in started:
                with contextlib.suppress(Exception):
                    await service.close()
            raise

    def request_stop(self) -> None:
        self._stop.set()

    async def wait(self) -> None:
        await self._stop.wait()

    async def stop(self) -> None:
        """Graceful: readiness off, refuse new requests, let in-flight ones finish."""
        grace = self.settings.graceful_timeout
        admission = self.admission
        admission.draining = True  # /readyz answers 503 from here on
        if self._grpc is not None:
            await self._grpc.set_serving(False)
        if admission.in_flight:
            log.info("draining %d in-flight request(s), up to %g s", admission.in_flight,
                     grace)
        if not await admission.drain(grace):
            log.warning("%d request(s) still running after the %g s grace period; "
                        "cancelling them", admission.in_flight, grace)
        admission.flush()  # this worker's last counts, before its process goes
        tasks = []
        if self._grpc is not None:
            tasks.append(self._grpc.stop(CLOSE_TIMEOUT))
        if self._runner is not None:
            tasks.append(self._runner.cleanup())
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.v2 is not None:  # every request is done: unmap the clients' regions
            self.v2.shared_memory.close()
        for service in self.services:
            await service.close()
        await self.dependencies.close()


def log_bound(name: str, settings: Settings, bound: Bound) -> None:
    scheme = "https" if settings.tls else "http"
    where = []
    if bound.http_port:
        base = f"{scheme}://{settings.host}:{bound.http_port}"
        where.append(f"HTTP on {base} (docs: {base}/docs)")
    if bound.grpc_port:
        where.append(f"gRPC on {settings.host}:{bound.grpc_port}" + (" (TLS)" if settings.tls
                                                                     else ""))
    # INFO, the default level: the normal start-up line must not read as trouble.
    log.info("tensorwire serving %s: %s; loop %s", name, "; ".join(where),
             loops.running())


def settle_heap() -> None:
    """Once a server is up: what start-up built (the model, modules, descriptors) lives as
    long as the process, so move it out of the cyclic collector's view and keep every
    later full collection short. bench/batching.py (HTTP, 64 clients): p99 34 -> 15 ms."""
    gc.collect()
    gc.freeze()


async def serve_forever(services: ServiceSpec | Sequence[tuple[ServiceSpec, Placement]],
                        settings: Settings, *, announce: bool = True,
                        server: Server | None = None) -> None:
    """Serve until SIGTERM/SIGINT (or `server.request_stop()`), then drain and stop."""
    server = server or Server(services, settings)
    names = " + ".join(s.name for s in server.services)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, server.request_stop)
    bound = await server.start()
    settle_heap()
    if announce:
        log_bound(names, settings, bound)
    await server.wait()
    log.info("tensorwire: shutting down %s (grace %gs)", names,
                settings.graceful_timeout)
    await server.stop()
