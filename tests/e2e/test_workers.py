"""`tensorwire serve --workers N`: N processes on one port pair, supervised."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import pytest

import tensorwire
from tensorwire.telemetry.metrics import FLUSH_INTERVAL
from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, request, sample, scrape, wait_for
from tests.support.ops_service import Ops
from tests.support.servers import ROOT, spawn_cli

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
    # every worker fails alike: said once, and no restarts before the server stops
    # (it printed the traceback 10 times in 16-39 s, restarting each worker 5 times)
    assert output.count("Traceback") == 1, output
    assert "before the server was ready; stopping the server" in output
    assert "restarting in" not in output


def _serve_once(*args: str) -> subprocess.CompletedProcess[str]:
    """`tensorwire serve` that is expected to stop by itself (within 30 s)."""
    return subprocess.run([sys.executable, "-m", "tensorwire", "serve", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=30)


@pytest.mark.parametrize(("first", "second", "protocol"), [
    (1, 2, "HTTP"), (2, 1, "HTTP"), (2, 2, "HTTP"), (2, 2, "gRPC")])
def test_a_second_server_on_the_ports_of_a_running_one_is_refused(first, second, protocol):
    """However many workers either has. Two `--workers N` servers both set SO_REUSEPORT,
    which Linux lets them share: the second one bound and took half the connections."""
    running = spawn_cli("tests.support.ops_service:Ops", "--workers", str(first))
    try:
        where = (["--http-port", str(running.http_port), "--grpc-port", str(running.grpc_port)]
                 if protocol == "HTTP" else ["--no-http", "--grpc-port", str(running.grpc_port)])
        try:
            out = _serve_once("tests.support.ops_service:Ops", "--workers", str(second), *where)
        except subprocess.TimeoutExpired:
            pytest.fail("the second server started on ports in use")
        port = running.http_port if protocol == "HTTP" else running.grpc_port
        assert out.returncode == 1, out.stderr
        assert out.stderr.strip().splitlines() == [
            f"tensorwire: error: cannot listen for {protocol} on 127.0.0.1:{port}: "
            "address already in use"]
        # the running server still has every connection to itself
        assert request(f"{running.http_url}/readyz").status == 200
    finally:
        running.stop()
