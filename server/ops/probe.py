"""`python -m tensorwire.ops.probe`: is the local server ready? Exit 0 if so, else 1.

The container's HEALTHCHECK (python:slim has no curl). It reads the same settings as
`tensorwire serve` (config file and `TENSORWIRE_*` env; not the server's flags) to find
the port and whether TLS and auth are on, then asks `/readyz` (or gRPC health when HTTP
is off) on the loopback address.
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


def http_ready(settings: Settings) -> bool:
    scheme = "https" if settings.tls else "http"
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{settings.http_port}/readyz")
    if settings.auth_token and not settings.auth_open_health:
        request.add_header("Authorization", f"Bearer {settings.auth_token}")
    context = None
    if settings.tls:  # loopback: the certificate names the public host, not 127.0.0.1
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def grpc_ready(settings: Settings) -> bool:
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
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


def main() -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"tensorwire.ops.probe: {exc}", file=sys.stderr)
        return 1
    ready = http_ready(settings) if settings.http else grpc_ready(settings)
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
