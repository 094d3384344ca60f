"""The CLI as users run it: serve, proto, openapi; clear errors with exit code 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import tensorwire
from examples.quickstart import Quickstart
from tests.support.grpc_calls import GrpcCaller
from tests.support.http_calls import post
from tests.support.servers import ROOT, spawn_cli


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tensorwire", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


@pytest.mark.parametrize(("target", "fragment"), [
    ("no_such_module:Svc", "no module named 'no_such_module'"),
    ("examples.quickstart:Missing", "has no attribute 'Missing'"),
    ("examples/does_not_exist.py:Svc", "no such file"),
    ("examples.quickstart:Summary", "not a @tensorwire.service"),
    ("", "invalid target"),
])
def test_bad_targets_exit_2_with_a_clear_message(target, fragment):
    out = run_cli("openapi", target)
    assert out.returncode == 2
    assert fragment in out.stderr
    assert "Traceback" not in out.stderr


def test_invalid_contract_exits_2_naming_the_parameter(tmp_path: Path):
    (tmp_path / "bad_svc.py").write_text(
        "import tensorwire\n"
        "@tensorwire.service\n"
        "class Bad:\n"
        "    @tensorwire.api\n"
        "    def m(self, x: int | str) -> int:\n"
        "        return 1\n")
    out = run_cli("proto", str(tmp_path / "bad_svc.py") + ":Bad")
    assert out.returncode == 2
    assert "Bad.m(), parameter 'x'" in out.stderr


def test_openapi_and_proto_commands():
    out = run_cli("openapi", "examples.constrained:TextGenerator")
    assert out.returncode == 0
    assert json.loads(out.stdout)["paths"]["/complete"]
    out = run_cli("proto", "examples/quickstart.py:Quickstart")
    assert out.returncode == 0 and "service Quickstart {" in out.stdout
    types = run_cli("proto", "--types", "examples.quickstart:Quickstart")
    assert "message Tensor {" in types.stdout


@pytest.mark.slow
def test_serve_both_protocols_from_a_file_path():
    server = spawn_cli("examples/quickstart.py:Quickstart")
    try:
        reply = post(server.http_url + "/summarize", {"text": "served from a file"})
        assert reply.json() == {"summary": "served from a file", "words": 4}
        with grpc.insecure_channel(server.grpc_target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            status = stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            assert status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0


@pytest.mark.slow
def test_no_grpc_serves_http_only():
    server = spawn_cli("examples.quickstart:Quickstart", "--no-grpc")
    try:
        assert post(server.http_url + "/upper", b"x", content_type="text/plain").text == "X"
        with grpc.insecure_channel(server.grpc_target) as channel, \
                pytest.raises(grpc.FutureTimeoutError):
            grpc.channel_ready_future(channel).result(timeout=0.5)
    finally:
        server.stop()


@pytest.mark.slow
def test_no_http_serves_grpc_only():
    server = spawn_cli("examples.quickstart:Quickstart", "--no-http", http=False,
                       drain_output=True)
    try:
        with grpc.insecure_channel(server.grpc_target) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            deadline = time.monotonic() + 60
            status = None
            while status != health_pb2.HealthCheckResponse.SERVING:
                assert server.process is not None and server.process.poll() is None, \
                    server.output()
                assert time.monotonic() < deadline, f"not SERVING: {server.output()}"
                try:
                    status = stub.Check(health_pb2.HealthCheckRequest(), timeout=1,
                                        wait_for_ready=True).status
                except grpc.RpcError:
                    time.sleep(0.05)
        with GrpcCaller(tensorwire.get_service_spec(Quickstart), server.grpc_target) as caller:
            assert caller.call("upper", {"text": "x"}) == "X"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.http_port), timeout=2).close()
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0


def test_import_tensorwire_stays_light():
    code = ("import sys, tensorwire; "
            "print(' '.join(m for m in ('torch', 'tensorflow', 'pandas', 'PIL', 'grpc', "
            "'aiohttp') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import tensorwire"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.stderr.splitlines()
                if "|" in line}
    assert not imported & {"torch", "tensorflow", "pandas", "PIL"}
