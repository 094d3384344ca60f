"""The one admission gate: concurrency limit, drain, metrics and access log."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tensorwire.context import Headers, RequestInfo
from tensorwire.errors import Overloaded, ServiceUnavailable
from tensorwire.runtime.admission import Admission
from tensorwire.settings import Settings
from tensorwire.telemetry import logs, metrics


def req(request_id: str) -> RequestInfo:
    return RequestInfo("http", "api", Headers(), None, request_id)


def count(api: str, protocol: str, status: str) -> float:
    metrics.flush()  # what a scrape does first
    return metrics.REGISTRY.get_sample_value(
        "tensorwire_requests_total", {"api": api, "protocol": protocol, "status": status}) or 0


def in_flight(api: str, protocol: str) -> float:
    metrics.flush()
    return metrics.REGISTRY.get_sample_value(
        "tensorwire_requests_in_flight", {"api": api, "protocol": protocol}) or 0


def test_limit_refuses_with_retry_after_and_counts_it():
    adm = Admission(Settings(max_concurrency=2, retry_after=7))
    before_ok, before_refused = count("adm_a", "http", "200"), count("adm_a", "http", "503")
    t1 = adm.admit("http", "adm_a", req("r1"))
    adm.admit("http", "adm_a", req("r2"))
    assert adm.in_flight == 2 and in_flight("adm_a", "http") == 2
    with pytest.raises(Overloaded) as exc:
        adm.admit("http", "adm_a", req("r3"))
    assert exc.value.headers["Retry-After"] == "7"
    assert exc.value.status_code == 503 and exc.value.grpc_code == "RESOURCE_EXHAUSTED"
    t1.finish(200, 10, 20)
    t1.finish(200, 10, 20)  # a second finish is ignored
    assert adm.in_flight == 1 and in_flight("adm_a", "http") == 1
    adm.admit("http", "adm_a", req("r4"))  # room again
    assert count("adm_a", "http", "200") - before_ok == 1
    assert count("adm_a", "http", "503") - before_refused == 1


def test_no_limit_by_default():
    adm = Admission(Settings())
    tickets = [adm.admit("grpc", "adm_b", req(str(i))) for i in range(500)]
    assert adm.in_flight == 500
    for t in tickets:
        t.finish("OK")
    assert adm.in_flight == 0 and in_flight("adm_b", "grpc") == 0


async def test_drain_refuses_new_and_waits_for_in_flight():
    adm = Admission(Settings())
    ticket = adm.admit("grpc", "adm_c", req("r1"))
    drain = asyncio.create_task(adm.drain(5))
    await asyncio.sleep(0.05)
    assert not drain.done()
    with pytest.raises(ServiceUnavailable):
        adm.admit("grpc", "adm_c", req("r2"))
    ticket.finish("OK")
    assert await asyncio.wait_for(drain, 1) is True


async def test_drain_gives_up_after_its_timeout():
    adm = Admission(Settings())
    adm.admit("http", "adm_d", req("r1"))
    assert await adm.drain(0.05) is False


def test_access_line_per_request(caplog):
    adm = Admission(Settings(access_log=True))
    adm.describe("http", "adm_e", "POST", "/adm-e")
    peer_asked = []

    def peer() -> str:
        peer_asked.append(1)
        return "10.1.2.3"

    info = RequestInfo("http", "adm_e", Headers(), peer, "req-42")
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        adm.admit("http", "adm_e", info).finish(201, 3, 4)
    (record,) = [r for r in caplog.records if r.name == "tensorwire.access"]
    assert record.fields["request_id"] == "req-42"
    assert {k: record.fields[k] for k in ("client", "protocol", "method", "path", "api",
                                           "status", "bytes_in", "bytes_out")} == {
        "client": "10.1.2.3", "protocol": "http", "method": "POST", "path": "/adm-e",
        "api": "adm_e", "status": "201", "bytes_in": 3, "bytes_out": 4}
    assert "trace_id" not in record.fields  # tracing is off
    assert list(record.fields) == [f for f in logs.ACCESS_FIELDS if f != "trace_id"]
    assert record.getMessage().startswith("10.1.2.3 http POST /adm-e 201 ")
    assert record.getMessage().endswith(" in=3 out=4 id=req-42")
    assert peer_asked == [1]


def test_access_line_of_a_refused_grpc_call_names_the_rpc(caplog):
    adm = Admission(Settings(access_log=True, max_concurrency=1))
    adm.describe("grpc", "adm_g", "AdmG", "/pkg.Svc/AdmG")
    grpc_peer = "ipv6:%5B::1%5D:5678"
    adm.admit("grpc", "adm_g", RequestInfo("grpc", "adm_g", Headers(), grpc_peer, "a"))
    with caplog.at_level(logging.INFO, logger="tensorwire.access"), \
            pytest.raises(Overloaded):
        adm.admit("grpc", "adm_g", RequestInfo("grpc", "adm_g", Headers(), grpc_peer, "b"))
    (record,) = [r for r in caplog.records if r.name == "tensorwire.access"]
    assert record.getMessage().startswith(
        "[::1]:5678 grpc AdmG /pkg.Svc/AdmG RESOURCE_EXHAUSTED 0.00ms in=0 out=0 id=b")


def test_no_access_line_never_resolves_peer_or_id():
    adm = Admission(Settings(access_log=False))
    info = RequestInfo("http", "adm_h", Headers(), lambda: pytest.fail("peer read"))
    adm.admit("http", "adm_h", info).finish(200)
    assert info._id is None


def test_batch_observer_records_size_and_queue_waits():
    def value(name: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, {"api": "adm_batch"}) or 0

    observe = metrics.batch_observer("adm_batch")
    observe(3, [0.001, 0.002, 0.003])
    observe(1, [0.0])
    assert value("tensorwire_batch_size_count") == 2
    assert value("tensorwire_batch_size_sum") == 4
    assert value("tensorwire_batch_queue_wait_seconds_count") == 4


def test_access_log_and_metrics_can_be_off(caplog):
    adm = Admission(Settings(access_log=False, metrics=False))
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        adm.admit("http", "adm_f", req("r")).finish(200)
    assert not [r for r in caplog.records if r.name == "tensorwire.access"]
    assert count("adm_f", "http", "200") == 0
