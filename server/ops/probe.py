"""`python -m tensorwire.ops.probe`: is the local server ready? Exit 0 if so, else 1.

The container's HEALTHCHECK (python:slim has no curl). It reads the same settings as
`tensorwire serve` (config file and `TENSORWIRE_*` env; not the server's flags) to find
the port and whether TLS and auth are on, then asks `/readyz` (or gRPC health when HTTP
is off) on the loopback address. It says what it found in one line: on stdout when the
server is ready, on stderr why not (run by hand, a bare exit code 1 tells nothing).
"""

from __future__ import annotations

import ssl
import sys
import urllib.error
import urllib.request

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..settings import Settings
from .sources import ConfigError, load_settings

TIMEOUT = 3.0


#: What every "not ready" line adds: the probe cannot see the flags `serve` was given.
_SOURCES = ("the probe reads the TENSORWIRE_* variables, TENSORWIRE_CONFIG for a config "
            "file, not the flags of tensorwire serve")


def http_url(settings: Settings) -> str:
    scheme = "https" if settings.tls else "http"
    return f"{scheme}://127.0.0.1:{settings.http_port}/readyz"


def http_problem(settings: Settings) -> str | None:
    """Why the server does not answer /readyz with 200 (None: it does)."""
    url = http_url(settings)
    request = urllib.request.Request(url)
    if settings.auth_token and not settings.auth_open_health:
        request.add_header("Authorization", f"Bearer {settings.auth_token}")
    context = None
    if settings.tls:  # loopback: the certificate names the public host, not 127.0.0.1
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as reply:
            return None if reply.status == 200 else f"{url} answered {reply.status}"
    except urllib.error.HTTPError as exc:  # 503 while draining, 401 without the token
        return f"{url} answered {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{url}: {getattr(reason, 'strerror', None) or reason}"


def http_ready(settings: Settings) -> bool:
    return http_problem(settings) is None


def grpc_problem(settings: Settings) -> str | None:
    """Why gRPC health does not answer SERVING (None: it does)."""
    target = f"127.0.0.1:{settings.grpc_port}"
    if settings.tls:
        assert settings.tls_cert
        with open(settings.tls_cert, "rb") as fh:
            credentials = grpc.ssl_channel_credentials(root_certificates=fh.read())
        # the certificate names the public host, not the loopback address
        channel = grpc.secure_channel(target, credentials, options=[
            ("grpc.ssl_target_name_override", "localhost")])
    else:
        channel = grpc.insecure_channel(target)
    metadata = None
    if settings.auth_token and not settings.auth_open_health:
        metadata = (("authorization", f"Bearer {settings.auth_token}"),)
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=TIMEOUT, metadata=metadata)
        except grpc.RpcError as exc:
            return f"gRPC health on {target}: {exc.code().name}: {exc.details()}"
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return f"gRPC health on {target}: {status}"
    return None


def grpc_ready(settings: Settings) -> bool:
    return grpc_problem(settings) is None


def main() -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"tensorwire.ops.probe: {exc}", file=sys.stderr)
        return 1
    if settings.http:
        problem, where = http_problem(settings), http_url(settings)
    else:
        problem, where = grpc_problem(settings), f"gRPC health on 127.0.0.1:{settings.grpc_port}"
    if problem is not None:
        print(f"tensorwire.ops.probe: not ready: {problem} ({_SOURCES})", file=sys.stderr)
        return 1
    print(f"tensorwire.ops.probe: ready: {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
