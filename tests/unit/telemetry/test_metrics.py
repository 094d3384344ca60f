"""Request metrics counted on the loop, then flushed into prometheus_client."""

from __future__ import annotations

import asyncio
import gc

from prometheus_client import Histogram
from prometheus_client.utils import floatToGoString

from tensorwire.context import Headers, RequestInfo
from tensorwire.runtime.admission import Admission
from tensorwire.settings import Settings
from tensorwire.telemetry import metrics


def sample(name: str, **labels: str) -> float:
    """A series' value; a series that is not there fails, so it is never read as 0."""
    value = metrics.REGISTRY.get_sample_value(name, labels)
    assert value is not None, f"no series {name}{labels}"
    return value


def test_buckets_match_what_prometheus_observe_would_count() -> None:
    values = [0.0, 0.001, 0.0011, 0.0025, 0.3, 1.0, 59.9, 60.0, 61.0, 1e9]
    ours = metrics.Series("met_buckets", "http")
    for v in values:
        ours.answered("200", v, 0, 0)
    ours.flush()
    reference = Histogram("met_reference_seconds", "reference",
                                  buckets=metrics.LATENCY_BUCKETS)
    for v in values:
        reference.observe(v)
    for bound in metrics.LATENCY_BUCKETS:
        le = floatToGoString(bound)
        got = sample("tensorwire_request_duration_seconds_bucket", api="met_buckets",
                     protocol="http", le=le)
        want = sample("met_reference_seconds_bucket", le=le)
        assert got == want, (le, got, want)
    assert sample("tensorwire_request_duration_seconds_sum", api="met_buckets",
                  protocol="http") == sum(values)


def test_size_buckets_and_statuses_match_prometheus() -> None:
    sizes = [0, 63, 64, 65, 4096, 5000, 2**28, 2**30]
    ours = metrics.Series("met_sizes", "grpc")
    for i, n in enumerate(sizes):
        ours.answered("OK" if i % 3 else "INTERNAL", 0.0, n, n * 2)
    ours.flush()
    for name, factor in (("request", 1), ("response", 2)):
        reference = Histogram(f"met_{name}_reference", "reference",
                              buckets=metrics.SIZE_BUCKETS)
        for n in sizes:
            reference.observe(n * factor)
        for bound in metrics.SIZE_BUCKETS:
            le = floatToGoString(bound)
            assert sample(f"tensorwire_{name}_size_bytes_bucket", api="met_sizes",
                          protocol="grpc", le=le) == sample(
                f"met_{name}_reference_bucket", le=le), (name, le)
    assert sample("tensorwire_requests_total", api="met_sizes", protocol="grpc",
                  status="INTERNAL") == 3
    assert sample("tensorwire_requests_total", api="met_sizes", protocol="grpc",
                  status="OK") == 5


def test_held_answers_stay_bounded(monkeypatch) -> None:
    """Answers wait for the next flush in flat buffers; past a bound they are flushed at
    once, so no rate outgrows the memory between two flushes."""
    monkeypatch.setattr(metrics, "_PENDING_MAX", 10)
    ours = metrics.Series("met_bounded", "http")
    for _ in range(25):
        ours.answered("200", 0.01, 1, 1)
    assert len(ours._seconds) == len(ours._received) == len(ours._sent) == 5
    assert ours._statuses == {"200": 5}
    assert sample("tensorwire_requests_total", api="met_bounded", protocol="http",
                  status="200") == 20


async def test_counts_reach_a_scrape_at_once_and_prometheus_within_the_interval() -> None:
    adm = Admission(Settings())
    labels = {"api": "met_async", "protocol": "grpc"}
    for _ in range(7):
        adm.admit("grpc", "met_async", RequestInfo("grpc", "met_async", Headers(), None,
                                                   "r")).finish("OK", 10, 2000)
    held = adm.admit("grpc", "met_async", RequestInfo("grpc", "met_async", Headers(), None,
                                                      "r"))
    text, _ = metrics.render()  # a scrape flushes first
    assert b'tensorwire_requests_total{api="met_async",protocol="grpc",status="OK"} 7.0' \
        in text
    assert sample("tensorwire_requests_in_flight", **labels) == 1
    held.finish("INVALID_ARGUMENT")
    await asyncio.sleep(metrics.FLUSH_INTERVAL + 0.2)  # no scrape: the timer flushes
    assert sample("tensorwire_requests_total", status="INVALID_ARGUMENT", **labels) == 1
    assert sample("tensorwire_requests_in_flight", **labels) == 0
    assert sample("tensorwire_response_size_bytes_count", **labels) == 8
    assert sample("tensorwire_response_size_bytes_sum", **labels) == 7 * 2000


def test_held_answers_leave_nothing_for_the_garbage_collector() -> None:
    """Between two flushes a busy worker holds thousands of answers; as tracked objects
    (a tuple each) the collector walked them all and stopped the loop for milliseconds."""
    ours = metrics.Series("met_untracked", "http")
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        for i in range(5000):
            ours.answered("200" if i % 7 else "503", 0.001 * (i % 13), 80, 45)
        grown = len(gc.get_objects()) - before
    finally:
        gc.enable()
    assert grown < 100, grown
    ours.flush()
    assert sample("tensorwire_requests_total", api="met_untracked", protocol="http",
                  status="503") == 715
