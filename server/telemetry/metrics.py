"""Prometheus metrics, each created once at import and named here (the one list).

Workers write to `PROMETHEUS_MULTIPROC_DIR` when it is set (the supervisor sets a
per-run directory before any worker imports prometheus_client); `/metrics` then sums
every worker's files, so one scrape reports the whole server. One process: the default
registry (plus its process/GC collectors, and any metric the service defines itself).

Request metrics are recorded by `tensorwire.admission` for both protocols. The batching
layer records `BATCH_SIZE` and `BATCH_QUEUE_WAIT` per API through `batch_observer(api)`.
"""

from __future__ import annotations

import os
from bisect import bisect_left
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
    """One histogram child's observations as plain counts until the next flush.

    `Histogram.observe` takes a lock and walks the bucket list in Python for every value
    (~1.5 us each, three per request); a `bisect` into a list of ints is a tenth of that.
    """

    __slots__ = ("bounds", "child", "counts", "total")

    def __init__(self, child) -> None:
        self.child = child
        self.bounds = list(child._upper_bounds)
        self.counts = [0] * len(self.bounds)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def flush(self) -> None:
        counts = self.counts
        for i, n in enumerate(counts):
            if n:
                self.child._buckets[i].inc(n)
                counts[i] = 0
        if self.total:
            self.child._sum.inc(self.total)
            self.total = 0.0


class Series:
    """The request metrics of one (api, protocol), counted on the event loop.

    The hot path only bumps plain ints (no locks, no label lookups); `flush()` adds them
    to the prometheus_client metrics, which `render()` does before every scrape and the
    admission does at most every `FLUSH_INTERVAL` seconds while requests come in (so a
    worker's share reaches the multiprocess files within that interval).
    """

    __slots__ = ("_counters", "_counts", "_gauge", "api", "duration", "in_flight",
                 "protocol", "received", "sent")

    def __init__(self, api: str, protocol: str) -> None:
        self.api = api
        self.protocol = protocol
        self.in_flight = 0
        self._gauge = IN_FLIGHT.labels(api, protocol)
        self.duration = _Buckets(DURATION.labels(api, protocol))
        self.received = _Buckets(REQUEST_BYTES.labels(api, protocol))
        self.sent = _Buckets(RESPONSE_BYTES.labels(api, protocol))
        self._counts: dict[str, int] = {}
        self._counters: dict[str, object] = {}
        _ALL_SERIES.append(self)

    def answered(self, status: str, seconds: float, received: int, sent: int) -> None:
        counts = self._counts
        counts[status] = counts.get(status, 0) + 1
        # `_Buckets.observe` three times, inline: three method calls were a third of this
        duration, size_in, size_out = self.duration, self.received, self.sent
        duration.counts[bisect_left(duration.bounds, seconds)] += 1
        duration.total += seconds
        size_in.counts[bisect_left(size_in.bounds, received)] += 1
        size_in.total += received
        size_out.counts[bisect_left(size_out.bounds, sent)] += 1
        size_out.total += sent

    def flush(self) -> None:
        for status, n in self._counts.items():
            if n:
                counter = self._counters.get(status)
                if counter is None:
                    counter = self._counters[status] = REQUESTS.labels(
                        self.api, self.protocol, status)
                counter.inc(n)  # type: ignore[attr-defined]
                self._counts[status] = 0
        self.duration.flush()
        self.received.flush()
        self.sent.flush()
        self._gauge.set(self.in_flight)


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
