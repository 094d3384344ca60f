"""Prometheus metrics, each created once at import and named here (the one list).

Workers write to `PROMETHEUS_MULTIPROC_DIR` when it is set (the supervisor sets a
per-run directory before any worker imports prometheus_client); `/metrics` then sums
every worker's files, so one scrape reports the whole server. One process: the default
registry (plus its process/GC collectors, and any metric the service defines itself).

Request metrics are recorded by `tensorwire.admission` for both protocols. The batching
layer records `BATCH_SIZE` and `BATCH_QUEUE_WAIT` per API through `batch_observer(api)`.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Sequence

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0, 60.0, float("inf"))
#: 64 B .. 256 MiB in powers of 4.
SIZE_BUCKETS = (*(float(4**k) for k in range(3, 15)), float("inf"))
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, float("inf"))

_API = ("api", "protocol")

REQUESTS = Counter("tensorwire_requests", "API requests answered, by status (HTTP status "
                   "code or gRPC status name).", (*_API, "status"))
DURATION = Histogram("tensorwire_request_duration_seconds", "Time from admission to the "
                     "last byte of the answer.", _API, buckets=LATENCY_BUCKETS)
IN_FLIGHT = Gauge("tensorwire_requests_in_flight", "API requests being handled now.", _API,
                  multiprocess_mode="livesum")
REQUEST_BYTES = Histogram("tensorwire_request_size_bytes", "Request body / message size.",
                          _API, buckets=SIZE_BUCKETS)
RESPONSE_BYTES = Histogram("tensorwire_response_size_bytes", "Response body / message size "
                           "(streams: all chunks).", _API, buckets=SIZE_BUCKETS)
BATCH_SIZE = Histogram("tensorwire_batch_size", "Requests merged into one batched call.",
                       ("api",), buckets=BATCH_BUCKETS)
BATCH_QUEUE_WAIT = Histogram("tensorwire_batch_queue_wait_seconds", "Time a request "
                             "waited for its batch to run.", ("api",),
                             buckets=LATENCY_BUCKETS)


class _Buckets:
    """One histogram child, fed a flush's worth of observations at once.

    `Histogram.observe` takes a lock and walks the bucket list in Python for every value
    (~1.5 us each, three per request); a `bisect` per value was a tenth of that, and
    counting a whole flush's values with numpy (`searchsorted` is `bisect_left` over an
    array) a fraction again.
    """

    __slots__ = ("bounds", "child")

    def __init__(self, child) -> None:
        self.child = child
        self.bounds = tuple(child._upper_bounds)

    def add(self, values: Sequence[float]) -> None:
        import numpy as np  # lazily: `import tensorwire` stays light

        counts = np.bincount(np.searchsorted(self.bounds, values, side="left"),
                             minlength=len(self.bounds))
        buckets = self.child._buckets
        for i in np.flatnonzero(counts).tolist():
            buckets[i].inc(int(counts[i]))
        total = sum(values)  # in order, as `observe` one value at a time would add
        if total:
            self.child._sum.inc(total)


class Series:
    """The request metrics of one (api, protocol), counted on the event loop.

    The hot path appends one tuple (no locks, no label lookups, no bucket search);
    `flush()` counts them into the prometheus_client metrics, which `render()` does
    before every scrape and the admission does at most every `FLUSH_INTERVAL` seconds
    while requests come in (so a worker's share reaches the multiprocess files within
    that interval). Past `_PENDING_MAX` answers it flushes at once, so the list stays
    bounded whatever the rate.
    """

    __slots__ = ("_counters", "_gauge", "_pending", "api", "duration", "in_flight",
                 "protocol", "received", "sent")

    def __init__(self, api: str, protocol: str) -> None:
        self.api = api
        self.protocol = protocol
        self.in_flight = 0
        self._gauge = IN_FLIGHT.labels(api, protocol)
        self.duration = _Buckets(DURATION.labels(api, protocol))
        self.received = _Buckets(REQUEST_BYTES.labels(api, protocol))
        self.sent = _Buckets(RESPONSE_BYTES.labels(api, protocol))
        #: (status, seconds, bytes received, bytes sent) of answers not yet flushed.
        self._pending: list[tuple[str, float, int, int]] = []
        self._counters: dict[str, object] = {}
        _ALL_SERIES.append(self)

    def answered(self, status: str, seconds: float, received: int, sent: int) -> None:
        pending = self._pending
        pending.append((status, seconds, received, sent))
        if len(pending) >= _PENDING_MAX:
            self.flush()

    def flush(self) -> None:
        pending = self._pending
        if pending:
            self._pending = []
            statuses, seconds, received, sent = zip(*pending, strict=True)
            for status, n in collections.Counter(statuses).items():
                counter = self._counters.get(status)
                if counter is None:
                    counter = self._counters[status] = REQUESTS.labels(
                        self.api, self.protocol, status)
                counter.inc(n)  # type: ignore[attr-defined]
            self.duration.add(seconds)
            self.received.add(received)
            self.sent.add(sent)
        self._gauge.set(self.in_flight)


#: Answers a Series holds at most before it flushes (a few MiB at most).
_PENDING_MAX = 50_000
#: Every Series of this process, flushed together.
_ALL_SERIES: list[Series] = []
#: Seconds a worker may hold counts before they reach prometheus_client.
FLUSH_INTERVAL = 0.5


def flush() -> None:
    """Move every Series' pending counts into the prometheus_client metrics."""
    for series in _ALL_SERIES:
        series.flush()


def batch_observer(api: str) -> Callable[[int, Sequence[float]], None]:
    """The batcher's `observe(items, queue_waits)` hook for one API: one batch of
    `items` requests ran, after each waited `queue_waits[i]` seconds in the queue."""
    size = BATCH_SIZE.labels(api)
    wait = BATCH_QUEUE_WAIT.labels(api)

    def observe(items: int, queue_waits: Sequence[float]) -> None:
        size.observe(items)
        for seconds in queue_waits:
            wait.observe(seconds)

    return observe


def render() -> tuple[bytes, str]:
    """The exposition text of every metric (all workers' when multiprocess)."""
    flush()
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
