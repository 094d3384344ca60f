"""Admission: the one gate every API request passes, whatever its protocol.

`admit()` refuses a request while the server drains (ServiceUnavailable: 503 /
UNAVAILABLE) or when `max_concurrency` requests are already in flight (Overloaded: 503 +
Retry-After / RESOURCE_EXHAUSTED); otherwise it returns a `Ticket` that the transport
finishes with the answer's status and sizes. Finishing records the metrics and the
access log line, and lets a drain know when the last request is done. The per-request
timeout is applied by the runtime around the method call (`Admission.timeout`).

Everything here runs on the server's event loop, so the counters need no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..context import RequestInfo
from ..errors import Overloaded, ServiceUnavailable, TensorwireError
from ..settings import Settings
from ..telemetry import logs, metrics
from ..telemetry.metrics import Series

_INFO = logging.INFO


class Ticket:
    """One admitted request; `finish()` exactly once (later calls are ignored)."""

    __slots__ = ("_admission", "_series", "api", "protocol", "request", "start")

    def __init__(self, admission: Admission, protocol: str, api: str, request: RequestInfo,
                 series) -> None:
        self._admission = admission
        self._series = series
        self.protocol = protocol
        self.api = api
        self.request = request  # its id is made only if an access line is written
        self.start = 0.0

    def finish(self, status: int | str, received: int = 0, sent: int = 0) -> None:
        admission = self._admission
        if admission is None:
            return
        self._admission = None
        admission._release(self, str(status), received, sent)


class Admission:
    """Concurrency limit, drain state, request metrics and access log of one worker."""

    def __init__(self, settings: Settings) -> None:
        self.limit = settings.max_concurrency
        self.retry_after = str(settings.retry_after)
        #: Seconds an API method may run (None: no limit).
        self.timeout: float | None = settings.request_timeout or None
        self.in_flight = 0
        self.draining = False
        self._idle: asyncio.Event | None = None
        self._metrics = settings.metrics
        self._access = settings.access_log
        self._series: dict[tuple[str, str], object] = {}
        self._flush_due = False
        #: (protocol, api) -> (method, path) for access lines, declared once per endpoint
        #: (`describe`) so that no request pays for them.
        self.routes: dict[tuple[str, str], tuple[str, str]] = {}
        #: The current trace id, set by the runtime while tracing is on.
        self.trace_id: Callable[[], str | None] | None = None

    def describe(self, protocol: str, api: str, method: str, path: str) -> None:
        """Say how an endpoint's access lines name it: the HTTP verb and path, or the
        gRPC method and rpc path. Called once when the endpoint is built."""
        self.routes[(protocol, api)] = (method, path)

    def _log(self, protocol: str, api: str, status: str, seconds: float,
             request: RequestInfo, received: int, sent: int) -> None:
        """Write the access line (only called with the access log on: the peer and the
        request id are resolved here, never for a request that is not logged)."""
        method, path = self.routes.get((protocol, api), ("-", api))
        trace_id = self.trace_id() if self.trace_id is not None else None
        logs.access(logs.client_address(request.peer), protocol, method, path, api, status,
                    seconds, request.id, received, sent, trace_id)

    def _series_of(self, protocol: str, api: str):
        if not self._metrics:
            return None
        series = self._series.get((protocol, api))
        if series is None:
            series = self._series[(protocol, api)] = Series(api, protocol)
        return series

    def series(self, protocol: str, api: str) -> Series | None:
        """The metrics series of an endpoint (None with metrics off), for a compiled
        handler to hold instead of looking it up per request."""
        return self._series_of(protocol, api)  # type: ignore[return-value]

    def refusal(self) -> TensorwireError | None:
        """What refuses a new request now (draining, or the concurrency limit), if any."""
        if self.draining:
            return ServiceUnavailable("the server is shutting down; retry on another "
                                      "instance")
        if self.limit and self.in_flight >= self.limit:
            return Overloaded(f"more than {self.limit} requests in flight; retry later",
                              headers={"Retry-After": self.retry_after})
        return None

    def enter(self, series: Series | None) -> float:
        """Count one admitted request in (after `refusal()` said none); its start time."""
        if series is not None:
            series.in_flight += 1
            if not self._flush_due:
                self._schedule_flush()
        self.in_flight += 1
        return time.perf_counter()

    def leave(self, series: Series | None, start: float, protocol: str, api: str,
              status: str, received: int, sent: int,
              request: RequestInfo | Callable[[], RequestInfo], ran: float = 0.0,
              done: float = 0.0) -> None:
        """Count one request out: metrics, the access line (`request` may be a function
        making the RequestInfo, called only when a line is written), the drain. `ran`
        and `done`: when the plan's call began and gave its result (perf_counter; 0: it
        did not), which split a successful request's time into its phases (Triton's
        statistics read them back from the metrics)."""
        self.in_flight -= 1
        seconds = time.perf_counter() - start
        if series is not None:
            series.in_flight -= 1
            series.answered(status, seconds, received, sent, start, ran, done)
            if not self._flush_due:
                self._schedule_flush()
        if self._access and logs.ACCESS.isEnabledFor(_INFO):
            self._log(protocol, api, status, seconds,
                      request if isinstance(request, RequestInfo) else request(),
                      received, sent)
        if self.in_flight == 0 and self._idle is not None:
            self._idle.set()

    def admit(self, protocol: str, api: str, request: RequestInfo) -> Ticket:
        """Admit a request or raise the error that refuses it (recorded as answered)."""
        error = self.refusal()
        if error is not None:
            self.refused(protocol, api, request, error)
            raise error
        series = self._series_of(protocol, api)
        ticket = Ticket(self, protocol, api, request, series)
        ticket.start = self.enter(series)
        return ticket

    def _refused(self, protocol: str, api: str, request: RequestInfo, status: str) -> None:
        series = self._series_of(protocol, api)
        if series is not None:
            series.answered(status, 0.0, 0, 0)
            self._schedule_flush()
        if self._access and logs.ACCESS.isEnabledFor(_INFO):
            self._log(protocol, api, status, 0.0, request, 0, 0)

    def _release(self, ticket: Ticket, status: str, received: int, sent: int) -> None:
        self.leave(ticket._series, ticket.start, ticket.protocol, ticket.api, status,
                   received, sent, ticket.request)

    def refused(self, protocol: str, api: str, request: RequestInfo,
                error: TensorwireError) -> None:
        """Record a refusal `refusal()` returned (metrics and access line, as `admit`)."""
        self._refused(protocol, api, request,
                      error.grpc_code if protocol == "grpc" else str(error.status_code))

    def _schedule_flush(self) -> None:
        """Counts reach prometheus_client within FLUSH_INTERVAL (one timer, not one a
        request); a scrape of this process flushes at once."""
        self._flush_due = True
        try:
            asyncio.get_running_loop().call_later(metrics.FLUSH_INTERVAL, self.flush)
        except RuntimeError:  # no loop (a direct call in tests): flush now
            self.flush()

    def flush(self) -> None:
        """Push this worker's pending request metrics to prometheus_client now."""
        self._flush_due = False
        if self._series:
            metrics.flush()

    async def drain(self, timeout: float) -> bool:
        """Refuse new requests from now on; wait up to `timeout` s for in-flight ones.

        Returns True when none is left.
        """
        self.draining = True
        if self.in_flight == 0:
            return True
        self._idle = asyncio.Event()
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True
