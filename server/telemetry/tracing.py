"""OpenTelemetry tracing (the `otel` extra): a server span per request, with children.

Off unless `--tracing`. Then each API request gets one SERVER span, a child of the
caller's trace when the request carries W3C `traceparent`/`tracestate` (HTTP headers or
gRPC metadata; whatever `OTEL_PROPAGATORS` names), with child spans for where its time
went:

    POST /summarize                    (HTTP; gRPC: quickstart.Quickstart/Summarize)
    ├── decode                         body / message -> validated arguments
    ├── batch queue                    batchable APIs: waiting for a batch to start
    ├── model                          the method (for a batch: the batched call)
    └── encode                         result -> body / message (unary APIs)

The server span is the current span while the method runs, so spans the service makes
itself nest under it (sync methods too: their thread gets the request's context).
Streaming APIs get the server span and `decode`.

Where spans go is OpenTelemetry's standard configuration: `OTEL_TRACES_EXPORTER`
(`otlp` by default, `console`, `none`, or any installed exporter's entry point),
`OTEL_EXPORTER_OTLP_*` (endpoint, protocol, headers...), `OTEL_TRACES_SAMPLER`,
`OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_BSP_*`; `OTEL_SDK_DISABLED=true`
turns tracing off. A service that installed its own global TracerProvider keeps it.

Cost: nothing unless tracing is on. This module imports no opentelemetry package at
import time; the transports hold `None` instead of a `Tracing` and test it once per
phase. bench/production_overhead.py measures both.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import importlib.metadata
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..context import RequestInfo
from ..settings import Settings
from ..version import __version__
from .logs import client_address

log = logging.getLogger("tensorwire.tracing")

#: gRPC status names -> codes (`rpc.grpc.status_code`), without importing grpc.
_GRPC_CODES = {name: i for i, name in enumerate((
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"))}
#: Server-side errors by OpenTelemetry's gRPC conventions (the rest are the client's).
_GRPC_SERVER_ERRORS = frozenset({"UNKNOWN", "DEADLINE_EXCEEDED", "UNIMPLEMENTED", "INTERNAL",
                                 "UNAVAILABLE", "DATA_LOSS"})
_EXPORTER_GROUP = "opentelemetry_traces_exporter"
#: Seconds the spans still queued when the process exits get to reach the collector.
EXIT_FLUSH_TIMEOUT = 1.0


class TracingUnavailable(RuntimeError):
    """Tracing was asked for but cannot run (the extra is missing, an unknown exporter)."""


def require(settings: Settings) -> None:
    """Fail start-up early, with one clear line, when tracing is on but cannot run."""
    if not settings.tracing:
        return
    try:
        import opentelemetry.sdk.trace  # noqa: F401 - the optional `otel` extra
    except ImportError:
        raise TracingUnavailable("--tracing needs OpenTelemetry: pip install "
                                 "'tensorwire[otel]'") from None


class Tracing:
    """The tracer of one server process, and the spans of its requests."""

    def __init__(self, tracer: Any, routes: dict[tuple[str, str], tuple[str, str]]) -> None:
        from opentelemetry import context, propagate, trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        self.tracer = tracer
        #: (protocol, api) -> (method, path): the admission gate's table (`describe`).
        self.routes = routes
        self._context = context
        self._propagate = propagate
        self._trace = trace
        self._server = SpanKind.SERVER
        self._error = Status(StatusCode.ERROR)
        self._names: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    @classmethod
    def from_settings(cls, settings: Settings, service_name: str,
                      routes: dict[tuple[str, str], tuple[str, str]]) -> Tracing | None:
        """The process's Tracing, or None when tracing is off (nothing is imported)."""
        if not settings.tracing or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
            return None
        try:
            from opentelemetry import trace
        except ImportError:
            raise TracingUnavailable("--tracing needs OpenTelemetry: pip install "
                                     "'tensorwire[otel]'") from None
        provider = settings.extra.get("tracer_provider") or _provider(settings, service_name)
        return cls(trace.get_tracer("tensorwire", __version__,
                                    tracer_provider=provider),  # type: ignore[arg-type]
                   routes)

    # ------------------------------------------------------------------ requests
    def _describe(self, protocol: str, api: str) -> tuple[str, dict[str, Any]]:
        """The server span's name and fixed attributes, made once per API."""
        method, path = self.routes.get((protocol, api), ("POST", f"/{api}"))
        if protocol == "grpc":
            service = path.strip("/").rsplit("/", 1)[0]
            described = (path.lstrip("/"), {"rpc.system": "grpc", "rpc.service": service,
                                            "rpc.method": method, "tensorwire.api": api})
        else:
            described = (f"{method} {path}", {"http.request.method": method,
                                              "http.route": path, "url.path": path,
                                              "tensorwire.api": api})
        self._names[(protocol, api)] = described
        return described

    def start(self, info: RequestInfo) -> RequestSpan:
        """The server span of a request that was just admitted, made current, and its
        `decode` child (decoding starts now)."""
        name, fixed = self._names.get((info.protocol, info.api)) or self._describe(
            info.protocol, info.api)
        parent = self._propagate.extract(info.headers)
        attributes = {**fixed, "tensorwire.request_id": info.id}
        peer = info.peer
        if peer:
            attributes["client.address"] = client_address(peer)
        span = self.tracer.start_span(name, context=parent, kind=self._server,
                                      attributes=attributes)
        current = self._trace.set_span_in_context(span, parent)
        token = self._context.attach(current)
        decode = self.tracer.start_span("decode", context=current)
        return RequestSpan(self, info.protocol, span, token, decode)

    def trace_id(self) -> str | None:
        """The current trace id as 32 hex digits (access lines), None outside a trace."""
        ctx = self._trace.get_current_span().get_span_context()
        return format(ctx.trace_id, "032x") if ctx.is_valid else None

    # ------------------------------------------------------------------ the model
    async def model_call(self, work: Awaitable[Any]) -> Any:
        """Await the method's call (not batched) inside a current `model` span."""
        span = self.tracer.start_span("model")
        token = self._context.attach(self._trace.set_span_in_context(span))
        try:
            return await work
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(self._error)
            raise
        finally:
            self._context.detach(token)
            span.end()

    @staticmethod
    def in_context(fn: Callable[[], Any]) -> Callable[[], Any]:
        """`fn`, run from another thread in the caller's context (the request's spans):
        a thread pool does not carry context variables by itself."""
        return functools.partial(contextvars.copy_context().run, fn)

    def enqueued(self) -> tuple[Any, int]:
        """What a batched request's spans need: its context and when it joined the queue."""
        return self._context.get_current(), time.time_ns()

    def batched(self, enqueued: tuple[Any, int], started: int, ended: int, size: int,
                requests: int, error: BaseException | None) -> None:
        """A batched request's `batch queue` and `model` spans, once its batch ran."""
        parent, arrived = enqueued
        attributes = {"tensorwire.batch.size": size, "tensorwire.batch.requests": requests}
        self.tracer.start_span("batch queue", context=parent, start_time=arrived,
                               attributes=attributes).end(end_time=started)
        model = self.tracer.start_span("model", context=parent, start_time=started,
                                       attributes=attributes)
        if error is not None:
            model.record_exception(error)
            model.set_status(self._error)
        model.end(end_time=ended)


class RequestSpan:
    """One request's server span and its open phase; `finish()` exactly once."""

    __slots__ = ("_phase", "_protocol", "_token", "_tracing", "span")

    def __init__(self, tracing: Tracing, protocol: str, span: Any, token: object,
                 decode: Any) -> None:
        self._tracing = tracing
        self._protocol = protocol
        self.span = span
        self._token = token
        self._phase: Any = decode

    def decoded(self) -> None:
        """Decoding is over (the model call comes next)."""
        phase, self._phase = self._phase, None
        if phase is not None:
            phase.end()

    def encoding(self) -> None:
        """The result is being encoded from now on, until `finish`."""
        self.decoded()
        self._phase = self._tracing.tracer.start_span("encode")

    def finish(self, status: int | str) -> None:
        """End every open span with the answer's status (HTTP code or gRPC name)."""
        tracing = self._tracing
        phase, self._phase = self._phase, None
        span = self.span
        if protocol_failed(self._protocol, status):
            span.set_status(tracing._error)
            if phase is not None:
                phase.set_status(tracing._error)
        if phase is not None:
            phase.end()
        if self._protocol == "grpc":
            span.set_attribute("rpc.grpc.status_code", _GRPC_CODES.get(str(status), 2))
        else:
            span.set_attribute("http.response.status_code", int(status))
        tracing._context.detach(self._token)
        span.end()


def protocol_failed(protocol: str, status: int | str) -> bool:
    """Whether the answer is the server's failure (5xx; gRPC's server-side codes)."""
    if protocol == "grpc":
        return str(status) in _GRPC_SERVER_ERRORS
    return int(status) >= 500


# ---------------------------------------------------------------------- set-up
def _provider(settings: Settings, service_name: str) -> Any:
    """The global TracerProvider: the service's own if it installed one, else an SDK
    provider with the exporters OTEL_TRACES_EXPORTER names (installed as the global one,
    so spans the service makes go the same way)."""
    from opentelemetry import trace

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return current
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    except ImportError:
        raise TracingUnavailable("--tracing needs the OpenTelemetry SDK: pip install "
                                 "'tensorwire[otel]'") from None
    named = "OTEL_SERVICE_NAME" in os.environ or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    resource = Resource.create({} if named else {SERVICE_NAME: service_name})
    sampler = None  # the SDK's default reads OTEL_TRACES_SAMPLER
    if not os.environ.get("OTEL_TRACES_SAMPLER") and settings.trace_sample_rate < 1.0:
        sampler = ParentBased(TraceIdRatioBased(settings.trace_sample_rate))
    # The SDK's own exit hook flushes without a bound (see `_shut_down`).
    provider = TracerProvider(resource=resource, sampler=sampler, shutdown_on_exit=False)
    exporters = _exporters()
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    atexit.register(_shut_down, provider, exporters, EXIT_FLUSH_TIMEOUT)
    return provider


def _shut_down(provider: Any, exporters: list[Any], timeout: float) -> bool:
    """Export the spans still queued at exit, for at most `timeout` seconds.

    The SDK's exit hook waits for the export in progress, and OTLP retries an absent
    collector with back-off until its own 10 s deadline: about 7 s of a stopped server
    doing nothing. Past `timeout` the exporters are shut down, which ends their retries
    at once; the spans not yet sent are dropped, with one warning. True: all exported.
    """
    worker = threading.Thread(target=provider.shutdown, name="tensorwire-trace-flush",
                              daemon=True)
    worker.start()
    worker.join(timeout)
    if not worker.is_alive():
        return True
    log.warning("tracing: spans not exported within %g s of shutdown (is the collector "
                "at OTEL_EXPORTER_OTLP_ENDPOINT up?); dropping them", timeout)
    quiet = _Quiet()
    for exporter in exporters:
        for cls in type(exporter).__mro__:  # their "aborting retry", "already shut down"
            logging.getLogger(cls.__module__).addFilter(quiet)
        with contextlib.suppress(Exception):
            exporter.shutdown()
    worker.join(timeout)
    return False


class _Quiet(logging.Filter):
    """Drops OpenTelemetry's records once tensorwire has said what happened."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _exporters() -> list[Any]:
    """The span exporters OTEL_TRACES_EXPORTER names, as OpenTelemetry's own
    auto-configuration reads it (`otlp` picks gRPC or HTTP by OTEL_EXPORTER_OTLP_*
    _PROTOCOL)."""
    out = []
    for raw in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(","):
        name = raw.strip().lower()
        if not name or name == "none":
            continue
        if name == "otlp":
            protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc")
            name = "otlp_proto_http" if protocol.startswith("http") else "otlp_proto_grpc"
        found = importlib.metadata.entry_points(group=_EXPORTER_GROUP, name=name)
        if not found:
            known = sorted(e.name for e in importlib.metadata.entry_points(
                group=_EXPORTER_GROUP))
            raise TracingUnavailable(f"OTEL_TRACES_EXPORTER: no span exporter named {name!r}"
                                     f" is installed (installed: {', '.join(known)})")
        out.append(next(iter(found)).load()())
    return out
