"""Prometheus metrics, each created once at import and named here (the one list).

Workers write to `PROMETHEUS_MULTIPROC_DIR` when it is set (the supervisor sets a
per-run directory before any worker imports prometheus_client); `/metrics` then sums
every worker's files, so one scrape reports the whole server. One process: the default
registry (plus its process/GC collectors, and any metric the service defines itself).

Request metrics are recorded by `tensorwire.admission` for both protocols. The batching
layer records `BATCH_SIZE`, `BATCH_QUEUE_WAIT` and `BATCH_SECONDS` per API through
`batch_observer(api)`. Triton's statistics extension (`tensorwire.v2.statistics`) is read
back from these same metrics (`collect`), so with several workers it reports the whole
server, as `/metrics` does.
"""

from __future__ import annotations

import os
import time
from array import array
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
#: Successful requests' seconds (Triton's statistics: success), and the phases of the
#: timed ones (the v2 routes: compute input / infer / output), summed per flush: no
#: observation per request.
PHASE_SECONDS = Counter("tensorwire_phase_seconds", "Seconds successful API requests "
                        "spent: total (admission to answer, every request), and for the "
                        "Open Inference Protocol's, per phase: decode (request read and "
                        "validated), compute (the method; a batch's queue included), "
                        "encode (answer made and written).", (*_API, "phase"))
TIMED_REQUESTS = Counter("tensorwire_timed_requests", "Successful API requests whose "
                         "decode, compute and encode phases are in "
                         "tensorwire_phase_seconds (the Open Inference Protocol's).", _API)
BATCH_SECONDS = Counter("tensorwire_batch_seconds", "Seconds batched calls spent per batch "
                        "size and phase: input (the requests joined), infer (the method), "
                        "output (copied to the host and split back).", ("api", "size", "phase"))
BATCH_RUNS = Counter("tensorwire_batch_runs", "Batched calls that succeeded, by batch size.",
                     ("api", "size"))
LAST_REQUEST = Gauge("tensorwire_last_request_timestamp_seconds", "When an API last "
                     "answered (Unix time, to within the flush interval).", ("api",),
                     multiprocess_mode="max")

#: Status labels of a successful answer (HTTP 2xx, gRPC OK).
SUCCESS = frozenset({"OK", *(str(code) for code in range(200, 300))})


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

    def add(self, values: array) -> None:
        import numpy as np  # lazily: `import tensorwire` stays light

        observed = np.frombuffer(values, dtype=values.typecode)
        counts = np.bincount(np.searchsorted(self.bounds, observed, side="left"),
                             minlength=len(self.bounds))
        buckets = self.child._buckets
        for i in np.flatnonzero(counts).tolist():
            buckets[i].inc(int(counts[i]))
        total = sum(values)  # in order, as `observe` one value at a time would add
        if total:
            self.child._sum.inc(total)


class Series:
    """The request metrics of one (api, protocol), counted on the event loop.

    The hot path adds one answer to four flat buffers: a count per status, and the
    seconds and sizes in `array`s (no locks, no label lookups, no bucket search, and no
    object left behind for the garbage collector). `flush()` counts them into the
    prometheus_client metrics, which `render()` does before every scrape and the
    admission does at most every `FLUSH_INTERVAL` seconds while requests come in (so a
    worker's share reaches the multiprocess files within that interval). Past
    `_PENDING_MAX` answers it flushes at once, so the buffers stay bounded whatever the
    rate.

    A tuple per answer cost the same on the hot path, but half a second of them (12,000
    at 24k requests/s) were 12,000 objects for the collector to walk and a `zip` to
    unpick: 3-18 ms with the loop stopped, twice a second, which put the HTTP p99 at 16
    clients at 1.3x bare aiohttp's (bench/NOTES.md); flushing the buffers takes ~0.2 ms.
    """

    __slots__ = ("_compute", "_counters", "_decode", "_gauge", "_last", "_ok_seconds",
                 "_phases", "_received", "_seconds", "_sent", "_statuses", "_timed",
                 "_timed_seconds", "api",
                 "duration", "in_flight", "protocol", "received", "sent")

    def __init__(self, api: str, protocol: str) -> None:
        self.api = api
        self.protocol = protocol
        self.in_flight = 0
        self._gauge = IN_FLIGHT.labels(api, protocol)
        self.duration = _Buckets(DURATION.labels(api, protocol))
        self.received = _Buckets(REQUEST_BYTES.labels(api, protocol))
        self.sent = _Buckets(RESPONSE_BYTES.labels(api, protocol))
        #: answers not yet flushed: how many per status, and their seconds and sizes
        self._statuses: dict[str, int] = {}
        self._seconds = array("d")
        self._received = array("q")
        self._sent = array("q")
        self._counters: dict[str, object] = {}
        #: successful answers' seconds, and the phases of those that ran a plan
        self._ok_seconds = 0.0
        self._decode = 0.0
        self._compute = 0.0
        self._timed = 0
        self._timed_seconds = 0.0
        self._phases = tuple(PHASE_SECONDS.labels(api, protocol, phase)
                             for phase in ("total", "decode", "compute", "encode"))
        self._last = LAST_REQUEST.labels(api)
        _ALL_SERIES.append(self)

    def answered(self, status: str, seconds: float, received: int, sent: int,
                 start: float = 0.0, ran: float = 0.0, done: float = 0.0) -> None:
        """One answer. A successful one that ran the plan (`done` set) also has its
        phases, from the perf_counter times of its admission (`start`), of its call
        (`ran`) and of its result (`done`): decode, compute, and the rest, encode."""
        statuses = self._statuses
        statuses[status] = statuses.get(status, 0) + 1
        pending = self._seconds
        pending.append(seconds)
        self._received.append(received)
        self._sent.append(sent)
        if status in SUCCESS:
            self._ok_seconds += seconds
            if done:
                self._timed_seconds += seconds
                self._decode += ran - start
                self._compute += done - ran
                self._timed += 1
        if len(pending) >= _PENDING_MAX:
            self.flush()

    def flush(self) -> None:
        seconds = self._seconds
        if seconds:
            statuses, received, sent = self._statuses, self._received, self._sent
            self._statuses = {}
            self._seconds, self._received, self._sent = array("d"), array("q"), array("q")
            for status, n in statuses.items():
                counter = self._counters.get(status)
                if counter is None:
                    counter = self._counters[status] = REQUESTS.labels(
                        self.api, self.protocol, status)
                counter.inc(n)  # type: ignore[attr-defined]
            self.duration.add(seconds)
            self.received.add(received)
            self.sent.add(sent)
            self._last.set(time.time())
        if self._ok_seconds:
            total, decode, compute, encode = self._phases
            total.inc(self._ok_seconds)
            if self._timed:
                decode.inc(self._decode)
                compute.inc(self._compute)
                encode.inc(max(self._timed_seconds - self._decode - self._compute, 0.0))
                TIMED_REQUESTS.labels(self.api, self.protocol).inc(self._timed)
            self._ok_seconds = self._decode = self._compute = self._timed_seconds = 0.0
            self._timed = 0
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


def batch_observer(api: str) -> Callable[[int, Sequence[float], Sequence[float] | None],
                                         None]:
    """The batcher's `observe(items, queue_waits, phases)` hook for one API: one batch of
    `items` requests ran, after each waited `queue_waits[i]` seconds in the queue; when
    it succeeded, `phases` are its input, infer and output seconds."""
    size = BATCH_SIZE.labels(api)
    wait = BATCH_QUEUE_WAIT.labels(api)
    by_size: dict[int, tuple] = {}  # a batch size's children, made once

    def observe(items: int, queue_waits: Sequence[float],
                phases: Sequence[float] | None = None) -> None:
        size.observe(items)
        for seconds in queue_waits:
            wait.observe(seconds)
        if phases is not None:
            children = by_size.get(items)
            if children is None:
                label = str(items)
                children = by_size[items] = (
                    BATCH_RUNS.labels(api, label),
                    *(BATCH_SECONDS.labels(api, label, p) for p in ("input", "infer", "output")))
            children[0].inc()
            for child, seconds in zip(children[1:], phases, strict=True):
                child.inc(seconds)

    return observe


def _registry() -> CollectorRegistry:
    """The registry a scrape reads: every worker's files when multiprocess, else this
    process's own."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return REGISTRY


def render() -> tuple[bytes, str]:
    """The exposition text of every metric (all workers' when multiprocess)."""
    flush()
    return generate_latest(_registry()), CONTENT_TYPE_LATEST


def samples(*families: str) -> list[tuple[str, dict[str, str], float]]:
    """The current samples (name, labels, value) of the named metric families, as a
    scrape would read them (all workers' when multiprocess), this worker's counts
    flushed first."""
    flush()
    wanted = set(families)
    return [(s.name, s.labels, s.value) for family in _registry().collect()
            if family.name in wanted for s in family.samples]
