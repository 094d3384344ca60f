"""gRPC connections that rebalance: maximum age, its grace, and keepalive.

Test-scale ages and keepalive times (fractions of a second) keep these fast; what is
asserted is counted (pings, connections, workers, failed calls), and the few time bounds
are stated in units of the configured age, never as how fast something ran.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import grpc
import pytest

import tensorwire
from tests.support.grpc_calls import GrpcCaller
from tests.support.h2 import ENHANCE_YOUR_CALM, Connection
from tests.support.servers import serving, spawn_cli
from tests.support.spread_service import Spread

pytestmark = pytest.mark.slow
SPEC = tensorwire.get_service_spec(Spread)
#: No connection age: the keepalive tests watch one connection for longer than that.
NO_AGE = {"grpc_max_connection_age": 0}


def test_idle_connections_are_pinged_and_a_dead_peer_is_dropped():
    with serving(Spread, http=False, grpc_keepalive_time=0.4, grpc_keepalive_timeout=0.4,
                 **NO_AGE) as server:
        live = Connection("127.0.0.1", server.grpc_port)
        dead = Connection("127.0.0.1", server.grpc_port, answer_pings=False)
        try:
            live.watch(3.0)
            # grpc's default pings after 2 hours, and not at all without calls
            assert len(live.pings) >= 2, live.pings
            assert live.closed_at is None and live.goaway is None
            # a peer that answers no ping is closed after the keepalive timeout (grpc's
            # default would wait 60 s; the watch ends long before that)
            dead.watch(10.0)
            assert len(dead.pings) == 1
            assert dead.closed_at is not None
        finally:
            live.close()
            dead.close()


@pytest.mark.parametrize("permit", [True, False])
def test_clients_may_ping_idle_connections_when_permitted(permit):
    """A client's keepalive pings on a connection without calls: accepted at the
    server's keepalive pace when permitted; grpc's default answers GOAWAY
    ENHANCE_YOUR_CALM ("too_many_pings") and closes the connection."""
    with serving(Spread, http=False, grpc_keepalive_time=0.4,
                 grpc_keepalive_permit_without_calls=permit, **NO_AGE) as server:
        conn = Connection("127.0.0.1", server.grpc_port)
        try:
            for _ in range(6):
                if conn.closed_at is not None:
                    break
                conn.send_ping()
                conn.watch(0.5)
            if permit:
                assert conn.goaway is None and conn.closed_at is None
                assert conn.pings  # and the server pinged the idle connection itself
            else:
                assert conn.goaway_error == ENHANCE_YOUR_CALM
                assert b"too_many_pings" in conn.goaway.payload  # type: ignore[union-attr]
                assert conn.pings == []
        finally:
            conn.close()


def test_an_aged_connection_is_closed_when_idle():
    with serving(Spread, http=False, grpc_max_connection_age=0.3,
                 grpc_max_connection_age_grace=5, request_timeout=5) as server:
        conn = Connection("127.0.0.1", server.grpc_port)
        try:
            conn.watch(5.0)
            assert conn.goaway_error == 0  # NO_ERROR: a graceful "reconnect, please"
            assert conn.closed_at is not None
        finally:
            conn.close()


def call_whoami(caller: GrpcCaller, api: str = "whoami", values: dict | None = None
                ) -> tuple[float, float, dict]:
    start = time.monotonic()
    who = caller.call(api, values or {}, timeout=30)
    return start, time.monotonic(), who


def test_one_plain_channel_moves_every_max_age_and_reaches_both_workers():
    """One grpcio channel with grpc's defaults: it gets a new connection at least once
    per max connection age, and over 16 ages both workers serve its calls."""
    age, ages = 0.5, 16
    server = spawn_cli("tests.support.spread_service:Spread", "--workers", "2",
                       "--grpc-max-connection-age", str(age),
                       "--grpc-max-connection-age-grace", "30", "--request-timeout", "10")
    caller = GrpcCaller(SPEC, server.grpc_target)  # one plain channel
    try:
        calls = []
        end = time.monotonic() + age * ages
        while time.monotonic() < end:
            calls.append(call_whoami(caller))
            time.sleep(0.01)
    finally:
        caller.close()
        server.stop()
    spans: dict[str, list[float]] = defaultdict(list)
    for start, done, who in calls:
        spans[who["peer"]].append(start)
        spans[who["peer"]].append(done)
    assert len(spans) >= ages // 2, f"{len(spans)} connections over {ages} ages"
    # from the end of a connection's first call to the start of its last: never much
    # longer than the age with grpc's +10 % jitter (the GOAWAY has to arrive too)
    for peer, times in spans.items():
        first_done, last_start = sorted(times)[1], sorted(times)[-2]
        assert last_start - first_done <= 1.6 * age, (peer, times)
    assert len({who["pid"] for _, _, who in calls}) == 2


@pytest.mark.parametrize("grace", [30.0, 0.1])
def test_an_aging_connection_fails_no_call_within_its_grace(grace):
    """Calls that are in flight when their connection ages finish on it (grace 30 s),
    and calls racing the GOAWAY are retried by grpc: no call fails. The control: a grace
    shorter than the calls cuts them, so the test does see failures when they happen."""
    age, hold = 0.3, 0.6
    with serving(Spread, http=False, grpc_max_connection_age=age,
                 grpc_max_connection_age_grace=grace, request_timeout=10) as server:
        caller = GrpcCaller(SPEC, server.grpc_target)  # all threads share one channel
        outcomes: list[tuple[str, str]] = []
        lock = threading.Lock()
        end = time.monotonic() + 8 * age

        def run(api: str, values: dict) -> None:
            while time.monotonic() < end:
                try:
                    who = caller.call(api, values, timeout=30)
                    result = ("OK", who["peer"])
                except grpc.RpcError as exc:
                    result = (exc.code().name, exc.details() or "")
                with lock:
                    outcomes.append(result)

        threads = [threading.Thread(target=run, args=("hold", {"seconds": hold}))
                   for _ in range(4)]
        threads += [threading.Thread(target=run, args=("whoami", {})) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
        finally:
            caller.close()
    failed = [o for o in outcomes if o[0] != "OK"]
    peers = {peer for code, peer in outcomes if code == "OK"}
    assert len(peers) >= 3  # the connection really aged, several times, under the calls
    if grace > hold:
        assert failed == [], failed[:5]
        assert len(outcomes) > 50
    else:
        assert failed and {code for code, _ in failed} <= {"UNAVAILABLE", "INTERNAL"}, failed
