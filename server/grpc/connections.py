"""gRPC connections bounded in time and number: the same hazards as HTTP's, as grpc core
channel arguments of the server.

- `header_timeout` -> `grpc.server_handshake_timeout_ms`: a connection must finish its
  handshake (TLS, then the HTTP/2 preface and SETTINGS) within it, or it is closed.
  grpc core's default is 120 s; a socket that sends nothing holds a descriptor that long.
- `max_connections` -> `grpc.max_allowed_incoming_connections`: connections beyond it
  are closed as they arrive (per worker, as for HTTP). grpc core has no default cap.
- `grpc_max_connection_idle` (default 300 s) -> `grpc.max_connection_idle_ms`: a
  connection with no call in flight for that long gets GOAWAY (gRFC A9); clients
  reconnect on their next call. grpc core's default is no limit, so idle channels held
  descriptors forever; 300 s is Envoy's edge `stream_idle_timeout`, and below the 30 min
  after which grpc clients let an idle channel go on their own.
- `grpc_max_concurrent_streams` (default 100) -> `grpc.max_concurrent_streams`: calls in
  flight on one connection; more wait in the client. Envoy's edge guide uses 100, the
  number RFC 9113 asks servers not to go below; grpc core's default is no limit.

Connection age and keepalive pings are set elsewhere; none of these touch them.
"""

from __future__ import annotations

from ..settings import Settings


def connection_options(settings: Settings) -> list[tuple[str, int]]:
    """grpc.aio server options for `settings`' connection limits (0 leaves grpc's own)."""
    options = []
    if settings.header_timeout > 0:
        options.append(("grpc.server_handshake_timeout_ms",
                        max(1, round(settings.header_timeout * 1000))))
    if settings.max_connections > 0:
        options.append(("grpc.max_allowed_incoming_connections", settings.max_connections))
    if settings.grpc_max_connection_idle > 0:
        options.append(("grpc.max_connection_idle_ms",
                        max(1, round(settings.grpc_max_connection_idle * 1000))))
    if settings.grpc_max_concurrent_streams > 0:
        options.append(("grpc.max_concurrent_streams", settings.grpc_max_concurrent_streams))
    return options
