"""Server settings: one dataclass that every transport reads.

The CLI builds it from flags; `from_sources` (production issue) layers defaults < TOML
config file < `TENSORWIRE_*` environment < flags.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1024 * 1024


@dataclass
class Settings:
    host: str = "127.0.0.1"
    http_port: int = 3000
    grpc_port: int = 50051
    http: bool = True
    grpc: bool = True
    workers: int = 1
    #: Threads running `def` (sync) API methods.
    threads: int = 8
    #: Largest request body / gRPC message accepted, and largest gRPC message sent.
    max_request_size: int = 100 * MiB
    max_response_size: int = 100 * MiB
    #: Seconds in-flight requests get to finish after SIGTERM.
    graceful_timeout: float = 30.0
    log_level: str = "info"
    extra: dict[str, object] = field(default_factory=dict)
