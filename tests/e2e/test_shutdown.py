"""SIGTERM drains: readiness off, new requests refused, in-flight ones finish, exit 0."""

from __future__ import annotations

import os
import re
import signal
import threading

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import tensorwire
from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, request, sample, scrape, wait_for
from tests.support.ops_service import Ops
from tests.support.servers import spawn_cli

pytestmark = pytest.mark.slow
SPEC = tensorwire.get_service_spec(Ops)
SLOW = 2.5


def fresh_channel(target: str) -> grpc.Channel:
    return grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])


def in_background(fn) -> tuple[threading.Thread, list]:
    box: list = []

    def run() -> None:
        try:
            box.append(fn())
        except Exception as exc:  # the assertion below shows it
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def grpc_call(target: str, api: str, values: dict):
    with GrpcCaller(SPEC, target, channel=fresh_channel(target)) as caller:
        try:
            return "OK", caller.call(api, values, timeout=30)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()


def answered(call):
    """`call()`, again while a connection is reset (a worker that finished its drain
    closed its socket under a connection the kernel had queued on it)."""
    for _ in range(20):
        try:
            return call()
        except ConnectionError:
            continue
    return call()


def health(target: str) -> str:
    with fresh_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def grpc_stream(target: str, api: str, values: dict):
    with GrpcCaller(SPEC, target, channel=fresh_channel(target)) as caller:
        try:
            return "OK", list(caller.stream(api, values, timeout=30))
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()


@pytest.mark.parametrize(("workers", "sig"), [(1, signal.SIGTERM), (2, signal.SIGTERM),
                                              (1, signal.SIGINT)])
def test_a_stop_signal_drains_in_flight_requests_and_streams(workers, sig):
    server = spawn_cli("tests.support.ops_service:Ops", "--workers", str(workers),
                       "--graceful-timeout", "20", drain_output=True)
    try:
        http_slow, http_box = in_background(
            lambda: post(server.http_url, "sleep", {"seconds": SLOW}))
        grpc_slow, grpc_box = in_background(
            lambda: grpc_call(server.grpc_target, "sleep_sync", {"seconds": SLOW}))
        sse, sse_box = in_background(
            lambda: post(server.http_url, "tick", {"n": 5, "delay": SLOW / 5}))
        grpc_ticks, ticks_box = in_background(
            lambda: grpc_stream(server.grpc_target, "tick", {"n": 5, "delay": SLOW / 5}))
        wait_for(lambda: sample(scrape(server.http_url), "tensorwire_requests_in_flight",
                                missing=0.0)
                 == 4, what="four requests in flight")

        os.kill(server.process.pid, sig)  # as Kubernetes (SIGTERM) or Ctrl-C: PID 1 only

        # A worker with nothing in flight has nothing to drain and closes at once: a new
        # connection the kernel had queued on its socket is reset. Every worker still
        # open answers 503; a reset means "this one is gone", and the next call lands on
        # a worker still draining.
        def draining() -> bool:  # every worker: several fresh connections in a row
            return all(answered(lambda: request(f"{server.http_url}/readyz")).status == 503
                       for _ in range(8))

        wait_for(draining, timeout=10, what="readiness off")
        ready = answered(lambda: request(f"{server.http_url}/readyz"))
        assert ready.json() == {"status": "draining"}
        refused = answered(lambda: post(server.http_url, "echo", {"text": "too late"}))
        assert refused.status == 503
        assert "shutting down" in refused.json()["error"]
        code, details = grpc_call(server.grpc_target, "echo", {"text": "too late"})
        assert code == "UNAVAILABLE" and "shutting down" in details
        assert health(server.grpc_target) == "NOT_SERVING"

        for thread in (http_slow, grpc_slow, sse, grpc_ticks):
            thread.join(30)
        http_reply = http_box[0]
        assert (http_reply.status, http_reply.json()) == (200, SLOW)
        assert grpc_box[0] == ("OK", SLOW)
        sse_reply = sse_box[0]
        assert sse_reply.status == 200
        assert sse_reply.body.count(b"data: ") == 5
        code, chunks = ticks_box[0]
        assert code == "OK" and len(chunks) == 5, ticks_box[0]
        assert server.process.wait(30) == 0
    finally:
        server.stop()
    assert re.search(r"draining \d in-flight request", server.output())


def test_requests_past_the_grace_period_are_cut():
    server = spawn_cli("tests.support.ops_service:Ops", "--graceful-timeout", "0.5",
                       drain_output=True)
    try:
        slow, box = in_background(lambda: post(server.http_url, "sleep", {"seconds": 20}))
        wait_for(lambda: sample(scrape(server.http_url), "tensorwire_requests_in_flight",
                                missing=0.0)
                 == 1, what="the slow request running")
        os.kill(server.process.pid, signal.SIGTERM)
        assert server.process.wait(10) == 0  # long before the request would end
        slow.join(10)
        assert isinstance(box[0], OSError) or box[0].status >= 500
    finally:
        server.stop()
    assert "1 request(s) still running after the 0.5 s grace period" in server.output()
