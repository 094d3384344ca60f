"""Server settings: one dataclass that every transport reads.

Each field carries its own documentation (`help`), so the CLI flags, the
`TENSORWIRE_*` environment variables, the TOML config keys and the README's settings
table are all derived from this one list (see `tensorwire.ops.sources`). Precedence, lowest
first: defaults < the service's @service options (`tensorwire.contract.options`) < config
file < environment < flags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MiB = 1024 * 1024
#: One `dependencies` entry: a name, `=`, a URL of a scheme the client takes.
_PLACED = re.compile(r"[A-Za-z][\w\-]*\s*=\s*(grpcs?|dns|https?)://?\S+")

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")
#: `auto` takes uvloop when it is installed (`tensorwire.ops.loops`).
LOOPS = ("auto", "asyncio", "uvloop")
MODEL_CONTROLS = ("none", "explicit")
SHARED_MEMORY = ("none", "system")


def _opt(default: Any, help: str, **meta: Any) -> Any:
    """A documented setting (metadata drives flags, env vars, TOML keys and docs)."""
    meta["help"] = help
    return field(default=default, metadata=meta, repr=not meta.get("secret", False))


@dataclass
class Settings:
    #: `MODULE:Class` to serve (the CLI's positional argument; more after it go to
    #: `services`). `PREFIX=MODULE:Class` serves it under /PREFIX.
    service: str = _opt("", "the service to serve, MODULE:Class or file.py:Class; "
                        "PREFIX=MODULE:Class serves it under /PREFIX; several on the "
                        "command line", positional=True)
    host: str = _opt("127.0.0.1", "bind address of both protocols", metavar="ADDR")
    http_port: int = _opt(3000, "HTTP port (0: any free port)", aliases=("--port",))
    grpc_port: int = _opt(50051, "gRPC port (0: any free port)")
    http: bool = _opt(True, "serve HTTP")
    grpc: bool = _opt(True, "serve gRPC")
    v2: bool = _opt(True, "serve the Open Inference Protocol (KServe v2: /v2 routes, "
                    "inference.GRPCInferenceService) beside each API's own")
    #: Triton's name for it: `explicit` lets clients load and unload services at run time
    #: (`tensorwire.runtime.control`); the repository index is always served.
    model_control: str = _opt("none", "explicit: clients may load and unload services at "
                              "run time (Triton's model repository extension: POST "
                              "/v2/repository/models/{m}/load|unload, gRPC "
                              "RepositoryModelLoad|Unload); none: refused",
                              choices=MODEL_CONTROLS)
    #: Off by default: the server maps memory a client names (`tensorwire.v2.shm_regions`).
    shared_memory: str = _opt("none", "system: clients on this host may pass v2 tensors "
                              "through POSIX shared-memory regions in /dev/shm they "
                              "register (Triton's system shared-memory extension; the "
                              "server maps memory a client names, and each worker holds "
                              "its own regions); none: refused", choices=SHARED_MEMORY)
    workers: int = _opt(1, "worker processes sharing both ports (SO_REUSEPORT)")
    loop: str = _opt("auto", "event loop: auto takes uvloop when it is installed "
                     "(pip install 'tensorwire[uvloop]'), else asyncio's", choices=LOOPS)
    #: Threads running `def` (sync) API methods.
    threads: int = _opt(8, "threads per worker running sync (def) API methods")
    #: Largest request body / gRPC message accepted, and largest gRPC message sent.
    max_request_size: int = _opt(100 * MiB, "largest request body / gRPC message, bytes "
                                 "(413 / RESOURCE_EXHAUSTED)", size=True)
    max_response_size: int = _opt(100 * MiB, "largest gRPC response message, bytes",
                                  size=True)
    max_parts: int = _opt(64, "most parts in one multipart request (413)")
    max_part_size: int = _opt(0, "largest multipart part, bytes (0: only "
                              "max_request_size applies)", size=True)
    max_stream_elements: int = _opt(1_000_000, "most elements one streamed input "
                                    "(AsyncIterator parameter) takes per call; beyond it "
                                    "413 / RESOURCE_EXHAUSTED / WebSocket close 1009 (0: "
                                    "no limit)")
    stream_idle_timeout: float = _opt(300.0, "seconds a streamed input waits for the "
                                      "client's next element (gRPC message, WebSocket "
                                      "message) before the call ends with 504 / "
                                      "DEADLINE_EXCEEDED / close 1011 (0: none)")
    max_concurrency: int = _opt(0, "most requests in flight per worker; beyond it 503 + "
                                "Retry-After / RESOURCE_EXHAUSTED (0: no limit)")
    retry_after: int = _opt(1, "seconds sent in Retry-After when over max_concurrency")
    batch_queue_items: int = _opt(0, "most items queued per batchable API per worker; "
                                  "beyond it 503 / RESOURCE_EXHAUSTED (0: 32 x "
                                  "max_batch_size)")
    request_timeout: float = _opt(60.0, "seconds an API method may run (504 / "
                                  "DEADLINE_EXCEEDED); for streams, per chunk (0: none)")
    #: Seconds in-flight requests get to finish after SIGTERM.
    graceful_timeout: float = _opt(30.0, "seconds in-flight requests get after SIGTERM")
    #: Hostile or broken clients: each connection is bounded in time and number (see
    #: tensorwire.http.connections and tensorwire.grpc.channel_args for the defaults' why).
    header_timeout: float = _opt(10.0, "seconds a client has to send a whole HTTP request "
                                 "head (from connecting, or from its first byte on a "
                                 "kept-alive connection; then 408 and closed) and to "
                                 "finish gRPC's connection handshake (0: none)")
    http_body_timeout: float = _opt(60.0, "seconds a request body may stop arriving "
                                    "before the connection is closed (0: none)")
    http_keepalive_timeout: float = _opt(75.0, "seconds an idle HTTP keep-alive "
                                         "connection stays open between requests; keep "
                                         "it above a load balancer's idle timeout")
    max_connections: int = _opt(1000, "most open connections per worker and protocol; "
                                "beyond it HTTP closes its longest-idle keep-alive "
                                "connection, or answers 503 when all are busy; gRPC "
                                "refuses (0: no limit)")
    grpc_max_connection_idle: float = _opt(300.0, "seconds a gRPC connection with no call "
                                           "in flight stays open before GOAWAY (0: no "
                                           "limit)")
    grpc_max_concurrent_streams: int = _opt(100, "most calls in flight on one gRPC "
                                            "connection (HTTP/2 streams); more wait in "
                                            "the client (0: no limit)")
    #: gRPC keeps one HTTP/2 connection per channel and SO_REUSEPORT (or a Kubernetes
    #: Service) places a connection, not a call: an aged connection is closed (GOAWAY)
    #: so that its client reconnects and lands anew on a worker or pod.
    grpc_max_connection_age: float = _opt(
        120.0, "seconds a gRPC connection lives (+/- 10 % jitter) before the server asks "
        "its client to reconnect, so long-lived channels spread over workers and pods "
        "(0: forever)")
    grpc_max_connection_age_grace: float = _opt(
        300.0, "seconds the calls in flight on an aged gRPC connection get to finish "
        "before it is closed; at least request_timeout")
    grpc_keepalive_time: float = _opt(
        60.0, "seconds of quiet after which the server pings a gRPC connection (keeps "
        "NAT and load-balancer state alive, finds dead peers)")
    grpc_keepalive_timeout: float = _opt(
        20.0, "seconds the server waits for a ping's answer before closing the "
        "connection")
    grpc_keepalive_permit_without_calls: bool = _opt(
        True, "ping idle gRPC connections too, and accept clients' keepalive pings on "
        "them (every min(10 s, grpc_keepalive_time) at most)")
    auth_token: str | None = _opt(None, "require `Authorization: Bearer <token>` on both "
                                  "protocols (prefer the env var: flags show in `ps`)",
                                  secret=True, metavar="TOKEN")
    auth_open_health: bool = _opt(True, "with auth: health endpoints and gRPC health "
                                  "stay open (probes send no token)")
    auth_open_metrics: bool = _opt(False, "with auth: /metrics stays open")
    auth_open_docs: bool = _opt(False, "with auth: /docs.json and /schema.json (which map "
                                "every API) stay open; /docs always loads and asks for the "
                                "token before it fetches them")
    tls_cert: str | None = _opt(None, "PEM certificate (chain) file: serve HTTPS and "
                                "TLS gRPC", metavar="FILE")
    tls_key: str | None = _opt(None, "PEM private key file of tls_cert", metavar="FILE")
    root_path: str = _opt("", "path prefix a proxy serves this server under (as uvicorn's "
                          "--root-path): docs and OpenAPI links carry it", metavar="PATH")
    cors_origins: list[str] = field(default_factory=list, metadata={
        "help": "origins allowed by CORS, comma-separated or `*` (empty: CORS off)"})
    metrics: bool = _opt(True, "serve Prometheus metrics on /metrics")
    #: Off by default (as in gunicorn): a line costs ~8 us, a tenth of a small request.
    access_log: bool = _opt(False, "one log line per request (logger tensorwire.access, "
                            "level info)")
    log_level: str = _opt("info", "log level", choices=LOG_LEVELS)
    log_format: str = _opt("text", "log line format", choices=LOG_FORMATS)
    #: The published contract whose field numbers gRPC keeps (`tensorwire.protobuf.lock`).
    proto_lock: str | None = _opt(None, "serve gRPC with the field numbers of the .proto "
                                  "published in this folder (or file); see `tensorwire "
                                  "proto --against`", metavar="DIR")
    #: Off by default; the `otel` extra must be installed to turn it on.
    tracing: bool = _opt(False, "OpenTelemetry tracing: a span per request with decode, "
                         "batch queue, model and encode children (needs the `otel` extra; "
                         "OTEL_* env vars choose the exporter)")
    trace_sample_rate: float = _opt(1.0, "fraction of new traces recorded, 0..1 "
                                    "(OTEL_TRACES_SAMPLER, when set, wins)")
    #: Development only: a fresh worker process per change, on the same ports.
    reload: bool = _opt(False, "development: restart the server when a .py file in the "
                        "service's folder changes (needs the `reload` extra; one worker)")
    #: More services beside `service`: the config file's `[[services]]` tables and the
    #: command line's further targets, each with its own options
    #: (`tensorwire.ops.hosting`). Not a flag: it is the positional list's tail.
    services: list[dict[str, Any]] = field(default_factory=list)
    #: Where the services' dependencies (`tensorwire.depends`) run when not in this
    #: process (`tensorwire.compose.placement`): one `NAME=URL` each.
    dependencies: list[str] = field(default_factory=list, metadata={
        "help": "run a dependency elsewhere: NAME=URL (grpc://host:port, dns:///host:port "
                "or http://host:port), NAME its service's name; repeat the flag (or "
                "separate with commas); a dependency not named runs in this process",
        "aliases": ("--dependency",), "metavar": "NAME=URL", "repeat": True})
    #: Free-form settings for extensions and tests (not exposed as flags).
    extra: dict[str, object] = field(default_factory=dict)

    def validate(self) -> Settings:
        """Reject values no server can run with; the message names the setting."""
        problems = []
        for name in ("http_port", "grpc_port"):
            if not 0 <= getattr(self, name) <= 65535:
                problems.append(f"{name} must be 0..65535")
        for name in ("workers", "threads", "max_request_size", "max_response_size",
                     "max_parts"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        for name in ("max_part_size", "max_stream_elements", "stream_idle_timeout",
                     "max_concurrency", "retry_after", "request_timeout",
                     "graceful_timeout", "batch_queue_items", "header_timeout",
                     "http_body_timeout", "http_keepalive_timeout", "max_connections",
                     "grpc_max_connection_idle", "grpc_max_concurrent_streams",
                     "grpc_max_connection_age", "grpc_max_connection_age_grace"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must not be negative")
        if not 0.0 <= self.trace_sample_rate <= 1.0:
            problems.append("trace_sample_rate must be from 0 to 1")
        for name in ("grpc_keepalive_time", "grpc_keepalive_timeout"):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be positive")
        if (self.grpc_max_connection_age and self.request_timeout
                and self.grpc_max_connection_age_grace < self.request_timeout):
            # a call that started just before its connection aged would be cut
            problems.append("grpc_max_connection_age_grace must be at least "
                            "request_timeout (or grpc_max_connection_age 0)")
        if self.log_level not in LOG_LEVELS:
            problems.append(f"log_level must be one of {', '.join(LOG_LEVELS)}")
        if self.loop not in LOOPS:
            problems.append(f"loop must be one of {', '.join(LOOPS)}")
        if self.model_control not in MODEL_CONTROLS:
            problems.append(f"model_control must be one of {', '.join(MODEL_CONTROLS)}")
        if self.shared_memory not in SHARED_MEMORY:
            problems.append(f"shared_memory must be one of {', '.join(SHARED_MEMORY)}")
        for entry in self.dependencies:
            if not _PLACED.fullmatch(entry.strip()):
                problems.append(f"dependencies: {entry!r} is not NAME=URL (e.g. "
                                "Model=grpc://model:50051)")
        if self.log_format not in LOG_FORMATS:
            problems.append(f"log_format must be one of {', '.join(LOG_FORMATS)}")
        if bool(self.tls_cert) != bool(self.tls_key):
            problems.append("tls_cert and tls_key go together")
        if self.auth_token is not None and not self.auth_token.strip():
            problems.append("auth_token must not be empty")
        if self.root_path and (not self.root_path.startswith("/")
                               or self.root_path.endswith("/") or "//" in self.root_path):
            problems.append("root_path must start with '/' and not end with '/' "
                            "(e.g. /models/iris), or be empty")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert)
