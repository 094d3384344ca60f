"""A draining server is alive, only not ready: Kubernetes must not restart a pod (and cut
its in-flight requests) because it is draining. HTTP /livez and the gRPC health service
the Deployment's liveness probe asks stay up through the drain; /readyz and gRPC
health "" flip."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.gate_service import GATE_ENV
from tests.support.ops_http import post, request, sample, scrape, wait_for
from tests.support.servers import ROOT, spawn_cli

pytestmark = pytest.mark.slow


def liveness_service() -> str:
    """The grpc.health.v1 service name the kubelet's liveness probe asks for."""
    deployment = yaml.safe_load((ROOT / "docker" / "k8s" / "base" / "deployment.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container["livenessProbe"]["grpc"].get("service", "")


def health(target: str, service: str) -> str:
    """What the kubelet's `grpc:` probe asks, on a fresh connection each time."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    with grpc.insecure_channel(target, options=options) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=10)
        except grpc.RpcError as exc:
            return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def test_liveness_stays_up_while_readiness_drains(tmp_path):
    gate = tmp_path / "open"
    liveness = liveness_service()
    server = spawn_cli("tests.support.gate_service:Gate", "--graceful-timeout", "60",
                       env={GATE_ENV: str(gate)}, drain_output=True)
    try:
        with ThreadPoolExecutor(1) as pool:
            assert health(server.grpc_target, liveness) == "SERVING"
            held = pool.submit(post, server.http_url, "hold", {}, timeout=60)
            wait_for(lambda: sample(scrape(server.http_url), "tensorwire_requests_in_flight",
                                    missing=0.0)
                     == 1, what="the request held in flight")

            os.kill(server.process.pid, signal.SIGTERM)  # what the kubelet sends
            wait_for(lambda: request(f"{server.http_url}/readyz").status == 503,
                     what="readiness off")
            assert request(f"{server.http_url}/readyz").json() == {"status": "draining"}
            assert health(server.grpc_target, "") == "NOT_SERVING"
            live = request(f"{server.http_url}/livez")
            assert (live.status, live.json()) == (200, {"status": "alive"})
            assert health(server.grpc_target, liveness) == "SERVING"
            assert not held.done()  # all of the above was seen mid-drain

            gate.touch()
            reply = held.result(60)
            assert (reply.status, reply.body) == (200, b"released")
        assert server.process.wait(60) == 0
    finally:
        gate.touch()
        server.stop()
