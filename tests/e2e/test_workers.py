"""`tensorwire serve --workers N`: N processes on one port pair, supervised."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time

import grpc
import pytest

import tensorwire
from tensorwire.telemetry.metrics import FLUSH_INTERVAL
from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, sample, scrape, wait_for
from tests.support.ops_service import Ops
from tests.support.servers import spawn_cli

pytestmark = pytest.mark.slow
SPEC = tensorwire.get_service_spec(Ops)


def http_pid(server) -> int:
    reply = post(server.http_url, "pid", {}, timeout=10)
    assert reply.status == 200, reply.body
    return reply.json()


def grpc_pid(server) -> int:
    # a local subchannel pool: each call gets its own connection, so the kernel's
    # SO_REUSEPORT balancing sees a new connection every time
    channel = grpc.insecure_channel(server.grpc_target,
                                    options=[("grpc.use_local_subchannel_pool", 1)])
    with GrpcCaller(SPEC, server.grpc_target, channel=channel) as caller:
        return caller.call("pid", {}, timeout=10)


def distinct(fetch, want: int, tries: int = 200) -> tuple[set[int], int]:
    seen: set[int] = set()
    calls = 0
    while len(seen) < want and calls < tries:
        seen.add(fetch())
        calls += 1
    return seen, calls


def test_two_workers_serve_both_protocols_and_a_killed_one_is_replaced():
    server = spawn_cli("tests.support.ops_service:Ops", "--workers", "2",
                       "--log-format", "json", "--access-log", drain_output=True)
    try:
        wait_for(lambda: len(distinct(lambda: http_pid(server), 2, tries=5)[0]) == 2,
                 what="both workers answering")
        http_pids, _ = distinct(lambda: http_pid(server), 2)
        assert len(http_pids) == 2 and server.process.pid not in http_pids
        grpc_pids, grpc_calls = distinct(lambda: grpc_pid(server), 2)
        assert grpc_pids == http_pids

        # one scrape sums every worker's counters: exactly the calls made so far, once
        # each worker's last counts are flushed (within metrics.FLUSH_INTERVAL)
        extra = post(server.http_url, "echo", {"text": "x"})
        assert extra.status == 200

        def counted() -> tuple[float, float]:
            samples = scrape(server.http_url)
            # a worker's series reach the scrape with its next flush: absent until then
            return (sample(samples, "tensorwire_requests_total", api="echo",
                           protocol="http", status="200", missing=0.0),
                    sample(samples, "tensorwire_requests_total", api="pid",
                           protocol="grpc", status="OK", missing=0.0))

        wait_for(lambda: counted() == (1, grpc_calls), timeout=5,
                 what=f"the scrape to count 1 echo and {grpc_calls} pid calls")
        time.sleep(2 * FLUSH_INTERVAL)
        assert counted() == (1, grpc_calls)  # and never more

        victim = sorted(http_pids)[0]
        os.kill(victim, signal.SIGKILL)

        def replaced() -> bool:
            try:
                pids, _ = distinct(lambda: http_pid(server), 2, tries=20)
            except OSError:  # a connection queued at the killed worker is reset
                return False
            return len(pids) == 2 and victim not in pids

        wait_for(replaced, timeout=30, what="the killed worker replaced")
    finally:
        server.stop()
    assert server.process.returncode == 0
    lines = [json.loads(line) for line in server.output().splitlines()
             if line.startswith("{")]
    died = [r["msg"] for r in lines if r["logger"] == "tensorwire.workers"
            and f"pid {victim}" in r["msg"] and "killed by signal SIGKILL" in r["msg"]]
    assert died and "restarting in" in died[0], died
    (where,) = [r["msg"] for r in lines if r["msg"].startswith("workers' metrics in ")]
    metrics_dir = where.split(" in ", 1)[1].split(" (")[0]
    assert metrics_dir.startswith(tempfile.gettempdir()) and not os.path.exists(metrics_dir)
    access = [r for r in lines if r["logger"] == "tensorwire.access"]
    assert {r["protocol"] for r in access} == {"http", "grpc"}
    assert len({r["pid"] for r in access}) >= 2


def test_a_worker_that_cannot_start_stops_the_server():
    server = spawn_cli("tests.support.ops_service:Broken", "--workers", "2", http=False,
                       drain_output=True)
    try:
        rc = server.process.wait(60)
    finally:
        server.stop()
    output = server.output()
    assert rc == 1, output
    assert "model file missing" in output  # the worker's own traceback is logged
    # headed by one line naming the service and the phase, then the user's frames
    assert ("service Broken failed in Broken.__init__: RuntimeError: model file missing\n"
            "Traceback (most recent call last):\n") in output
    assert 'ops_service.py", line' in output.split("Traceback", 1)[1]
    assert "failed to start (exit code 3) 5 times in a row; stopping the server" in output


def test_a_port_in_use_fails_fast():
    first = spawn_cli("tests.support.ops_service:Ops")
    second = None
    try:
        second = spawn_cli("tests.support.ops_service:Ops", "--workers", "2",
                           "--http-port", str(first.http_port), http=False,
                           drain_output=True)
        assert second.process.wait(30) == 1
    finally:
        if second is not None:
            second.stop()
        first.stop()
    assert f"cannot bind 127.0.0.1:{first.http_port}" in second.output()
