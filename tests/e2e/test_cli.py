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
import tensorwire.v1
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


# ------------------------------------------------------------- load errors (issue 20)
_BAD_INIT = '''
import tensorwire
import tensorwire.v1


def load_weights(path):
    with open(path, "rb") as fh:
        return fh.read()


@tensorwire.service
class Model:
    def __init__(self) -> None:
        self.weights = load_weights("/nonexistent/tensorwire-weights.bin")

    @tensorwire.api
    def predict(self, x: int) -> int:
        return x
'''

_BAD_IMPORT = '''
import tensorwire
import tensorwire.v1

SETTINGS = {"threshold": 0.5}
THRESHOLD = SETTINGS["treshold"]


@tensorwire.service
class Model:
    @tensorwire.api
    def predict(self, x: int) -> int:
        return x
'''


def _serve_until_exit(target: str, *extra: str, cwd: Path = ROOT
                      ) -> subprocess.CompletedProcess[str]:
    return run_cli("serve", target, "--http-port", "0", "--grpc-port", "0", *extra, cwd=cwd)


def test_an_exception_in_init_shows_its_traceback_under_the_phase(tmp_path: Path):
    (tmp_path / "bad_init.py").write_text(_BAD_INIT)
    out = _serve_until_exit("bad_init:Model", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    header = ("service Model failed in Model.__init__: FileNotFoundError: [Errno 2] No such "
              "file or directory: '/nonexistent/tensorwire-weights.bin'")
    assert header in out.stderr
    trace = out.stderr[out.stderr.index(header):]
    assert "Traceback (most recent call last):" in trace
    assert 'bad_init.py", line 14, in __init__' in trace  # the user's own frames
    assert 'bad_init.py", line 7, in load_weights' in trace
    assert "cannot listen" not in out.stderr  # not mistaken for a port problem


@pytest.mark.parametrize("target", ["bad_import:Model", "bad_import.py:Model"])
def test_an_exception_while_importing_shows_its_traceback(tmp_path: Path, target: str):
    (tmp_path / "bad_import.py").write_text(_BAD_IMPORT)
    for command in (("serve", target, "--http-port", "0", "--grpc-port", "0"),
                    ("proto", target)):
        out = run_cli(*command, cwd=tmp_path)
        assert out.returncode == 1, out.stderr
        assert f"service {target} failed in import: KeyError: 'treshold'" in out.stderr
        assert "Traceback (most recent call last):" in out.stderr
        assert 'bad_import.py", line 6, in <module>' in out.stderr


def test_a_missing_dependency_of_the_module_is_an_import_failure(tmp_path: Path):
    (tmp_path / "needs_dep.py").write_text(
        "import tensorwire_no_such_dependency\n")
    out = run_cli("proto", "needs_dep:Model", cwd=tmp_path)
    assert out.returncode == 1
    assert "failed in import: ModuleNotFoundError" in out.stderr
    assert "needs_dep.py\", line 1, in <module>" in out.stderr


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("protocol", ["HTTP", "gRPC"])
def test_a_port_in_use_still_gets_its_own_message(protocol: str, workers: str):
    """One line naming the protocol, port and reason. A taken gRPC port printed grpc
    core's own log line and "Failed to bind ... set GRPC_VERBOSITY=debug" instead."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        ports = ([str(port), "0"] if protocol == "HTTP" else ["0", str(port)])
        out = run_cli("serve", "examples.quickstart:Quickstart", "--workers", workers,
                      "--http-port", ports[0], "--grpc-port", ports[1])
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"tensorwire: error: cannot listen for {protocol} on 127.0.0.1:{port}: "
        "address already in use"], out.stderr


# --------------------------------------------------------------------- CLI (issue 20)
def test_version():
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"tensorwire {tensorwire.__version__}"


def test_proto_types_needs_no_target():
    out = run_cli("proto", "--types")
    assert out.returncode == 0, out.stderr
    assert out.stdout == tensorwire.v1.proto_source()
    missing = run_cli("proto")
    assert missing.returncode == 2
    assert "name the service" in missing.stderr and "--types" in missing.stderr


def test_proto_oip_exports_the_inference_service_for_clients(tmp_path: Path):
    """`tensorwire proto --oip` prints grpc_service.proto; with --out it writes it and the
    model_config.proto it imports, and protoc compiles them as written."""
    from tensorwire import inference

    out = run_cli("proto", "--oip")
    assert out.returncode == 0, out.stderr
    assert out.stdout == inference.proto_source()
    assert "rpc RepositoryModelLoad(" in out.stdout and "rpc LogSettings(" in out.stdout
    written = run_cli("proto", "--oip", "--out", str(tmp_path))
    assert written.returncode == 0, written.stderr
    tree = tmp_path / "inference"
    assert sorted(p.name for p in tree.iterdir()) == ["grpc_service.proto",
                                                      "model_config.proto"]
    rc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}",
                         f"--python_out={tmp_path}", "inference/grpc_service.proto",
                         "inference/model_config.proto"], capture_output=True, text=True,
                        timeout=60)
    assert rc.returncode == 0, rc.stderr
    wrong = run_cli("proto", "--oip", "examples.quickstart:Quickstart")
    assert wrong.returncode == 2 and "takes no target" in wrong.stderr


@pytest.mark.slow
def test_port_alias_and_the_start_up_line_at_info():
    server = spawn_cli("examples.quickstart:Quickstart", "--port", "0", http=False,
                       drain_output=True)
    try:
        deadline = time.monotonic() + 60
        while "tensorwire serving" not in server.output():
            assert server.process is not None and server.process.poll() is None, \
                server.output()
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.05)
    finally:
        server.stop()
    (line,) = [li for li in server.output().splitlines() if "tensorwire serving" in li]
    assert " INFO tensorwire.serve " in line
    # --port 0 came after spawn_cli's --http-port: the alias set the same setting
    assert f"127.0.0.1:{server.http_port}" not in line
    assert " WARNING " not in server.output()
