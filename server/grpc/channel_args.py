"""gRPC connections: bounded in time and number, aged, and kept alive.

Limits (the same hazards as HTTP's):

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
  With it goes `grpc.http.overload_protection` = 0. That grpc core option (on by
  default) refuses a new stream with RST_STREAM REFUSED_STREAM while more streams are
  still *allocated* than the limit, and a stream stays allocated after its call ended
  until grpc.aio's Python side has released the call object. The client, which saw the
  call end, rightly opens the next one within the limit it read in SETTINGS, and under
  ordinary load (200 concurrent `def` calls, 1,000 short streams on one channel) 5-40 %
  of calls failed with `UNAVAILABLE`. Without it the limit is the one RFC 9113 defines
  (streams open on the connection), which the client honours by queueing: the cap still
  bounds the calls running at once and loses none (tests/e2e/test_grpc_load.py).

Age and keepalive: a gRPC channel is one HTTP/2 connection that carries every call, and
`SO_REUSEPORT` (like a Kubernetes `Service`) places a *connection* on one worker (pod)
for its whole life: a long-lived channel never moves, and `--workers N` does nothing for
it. gRPC's documented remedy is a maximum connection age: the server sends GOAWAY once a
connection is `grpc_max_connection_age` old (grpc adds +/- 10 % jitter so that clients
do not reconnect in step); the client stops putting new calls on it, reconnects (and
lands anew), and the calls still in flight get `grpc_max_connection_age_grace` seconds
to end. A call racing the GOAWAY is refused before it runs and retried transparently by
the client's gRPC library, so an aged connection fails no call.

Keepalive: the server pings a connection that has been quiet for `grpc_keepalive_time`
and closes it when no answer comes within `grpc_keepalive_timeout` (a peer that vanished
behind a NAT). With `grpc_keepalive_permit_without_calls` it also pings idle connections,
which keeps NAT and load-balancer state alive, and accepts clients' own keepalive pings
on them as often as every `min(MIN_CLIENT_PING_INTERVAL, grpc_keepalive_time)`; grpc's
default (one ping in 5 minutes, none without calls) would answer a client that pings
every 30 s with GOAWAY `too_many_pings`.
"""

from __future__ import annotations

from ..settings import Settings

#: Seconds: clients may send keepalive pings this often (or as often as the server's own
#: keepalive time, if shorter). Common client settings are 10-60 s.
MIN_CLIENT_PING_INTERVAL = 10.0
#: grpc's channel arguments are C ints of milliseconds.
_INT_MAX = 2**31 - 1


def _ms(seconds: float) -> int:
    return max(0, min(_INT_MAX, round(seconds * 1000)))


def lifetime_options(settings: Settings) -> list[tuple[str, int]]:
    """The grpc server channel arguments for connection age and keepalive."""
    options: list[tuple[str, int]] = []
    if settings.grpc_max_connection_age > 0:
        options += [
            ("grpc.max_connection_age_ms", _ms(settings.grpc_max_connection_age)),
            ("grpc.max_connection_age_grace_ms",
             _ms(settings.grpc_max_connection_age_grace)),
        ]
    permit = settings.grpc_keepalive_permit_without_calls
    options += [
        ("grpc.keepalive_time_ms", _ms(settings.grpc_keepalive_time)),
        ("grpc.keepalive_timeout_ms", _ms(settings.grpc_keepalive_timeout)),
        # grpc (1.85 measured) closes a connection whose ping went unanswered after
        # *this* timeout (default 60 s), whatever keepalive_timeout_ms says
        ("grpc.http2.ping_timeout_ms", _ms(settings.grpc_keepalive_timeout)),
        ("grpc.keepalive_permit_without_calls", 1 if permit else 0),
        # grpc stops pinging after 2 pings that carried no data: an idle connection
        # would then go quiet and a NAT could drop it
        ("grpc.http2.max_pings_without_data", 0),
    ]
    if permit:
        options.append(("grpc.http2.min_ping_interval_without_data_ms",
                        _ms(min(MIN_CLIENT_PING_INTERVAL, settings.grpc_keepalive_time))))
    return options


def limit_options(settings: Settings) -> list[tuple[str, int]]:
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
        options += [("grpc.max_concurrent_streams", settings.grpc_max_concurrent_streams),
                    # count open streams, not allocated ones (see the module's docstring)
                    ("grpc.http.overload_protection", 0)]
    return options


def connection_options(settings: Settings) -> list[tuple[str, int]]:
    """Every grpc server channel argument of this module: limits, age and keepalive."""
    return [*limit_options(settings), *lifetime_options(settings)]
