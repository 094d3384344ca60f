"""TLS on both protocols with a certificate made for the test."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import urllib.error

import grpc
import pytest

from tensorwire.ops.loops import uvloop_installed
from tensorwire.ops.probe import grpc_ready, http_ready
from tensorwire.settings import Settings
from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, request
from tests.support.ops_service import Ops
from tests.support.servers import ROOT, serving
from tests.support.tls import self_signed


@pytest.fixture(scope="module")
def cert_pair(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


def test_https_and_grpc_tls(cert_pair):
    cert, key = cert_pair
    with serving(Ops, tls_cert=str(cert), tls_key=str(key)) as server:
        https = f"https://127.0.0.1:{server.http_port}"
        trusted = ssl.create_default_context(cafile=str(cert))
        reply = post(https, "echo", {"text": "secure"}, context=trusted)
        assert (reply.status, reply.body) == (200, b"secure")
        assert request(f"{https}/readyz", context=trusted).status == 200
        # a client that does not trust the certificate is refused by its own TLS check
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            request(f"{https}/readyz", context=ssl.create_default_context())

        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        channel = grpc.secure_channel(server.grpc_target, credentials)
        with GrpcCaller(server.spec, server.grpc_target, channel=channel) as caller:
            assert caller.call("echo", {"text": "secure"}) == "secure"
        with GrpcCaller(server.spec, server.grpc_target) as plain, \
                pytest.raises(grpc.RpcError) as exc:
            plain.call("echo", {"text": "x"}, timeout=5)
        assert exc.value.code() == grpc.StatusCode.UNAVAILABLE

        # the container HEALTHCHECK speaks TLS too
        probe = Settings(http_port=server.http_port, grpc_port=server.grpc_port,
                         tls_cert=str(cert), tls_key=str(key))
        assert http_ready(probe)
        assert grpc_ready(probe)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_plain_http_to_the_tls_port_is_told_to_use_https(cert_pair, loop):
    """As nginx answers it (497): the connection used to close without a word."""
    if loop == "uvloop" and not uvloop_installed():
        pytest.skip("uvloop not installed")
    cert, key = cert_pair
    with serving(Ops, tls_cert=str(cert), tls_key=str(key), loop=loop,
                 header_timeout=1.0) as server:
        port = server.http_port
        for _ in range(2):
            plain = request(f"http://127.0.0.1:{port}/readyz", timeout=5)
            assert plain.status == 400, plain.body
            body = json.loads(plain.body)
            assert body["error"] == ("this port speaks HTTPS: use https://, not http:// "
                                     f"(port {port})")
            assert body["request_id"] == plain.headers["X-Request-ID"]
            assert plain.headers["Content-Type"] == "application/json"
            # and TLS goes on as before on the same port, the first bytes left for it
            trusted = ssl.create_default_context(cafile=str(cert))
            reply = post(f"https://127.0.0.1:{port}", "echo", {"text": "s"}, context=trusted)
            assert (reply.status, reply.body) == (200, b"s")
        # a connection that never says anything is closed after header_timeout
        with socket.create_connection(("127.0.0.1", port), timeout=15) as silent:
            assert silent.recv(1) == b""


def test_missing_certificate_fails_start_up(tmp_path):
    with pytest.raises(OSError, match="tls_cert"), serving(
            Ops, tls_cert=str(tmp_path / "nope.pem"), tls_key=str(tmp_path / "nope.key")):
        pass


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_key_that_is_not_the_certificates_is_one_line_before_start_up(
        tmp_path, cert_pair, workers):
    """It was a Python traceback (one worker) or one from every worker, restarted
    five times (two workers), and exit code 1."""
    cert, _ = cert_pair
    _, other_key = self_signed(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "tensorwire", "serve", "tests.support.ops_service:Ops",
         "--workers", workers, "--http-port", "0", "--grpc-port", "0",
         "--tls-cert", str(cert), "--tls-key", str(other_key)],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("tensorwire: error: tls_cert/tls_key: cannot load the "
                           "certificate and key:"), line
    assert "key values mismatch" in line
