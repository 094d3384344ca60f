"""gRPC connection limits become grpc core server options (0 leaves grpc's own)."""

from __future__ import annotations

from tensorwire.grpc.connections import connection_options
from tensorwire.settings import Settings


def test_defaults_bound_every_connection_hazard():
    assert dict(connection_options(Settings())) == {
        "grpc.server_handshake_timeout_ms": 10_000,
        "grpc.max_allowed_incoming_connections": 1000,
        "grpc.max_connection_idle_ms": 300_000,
        "grpc.max_concurrent_streams": 100,
    }


def test_zero_leaves_grpc_defaults():
    off = Settings(header_timeout=0, max_connections=0, grpc_max_connection_idle=0,
                   grpc_max_concurrent_streams=0)
    assert connection_options(off) == []
    assert dict(connection_options(Settings(header_timeout=0.0001)))[
        "grpc.server_handshake_timeout_ms"] == 1
