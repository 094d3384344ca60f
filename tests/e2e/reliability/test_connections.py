"""Connections that never finish a request are closed, on both protocols, and each
worker holds a bounded number of them.

Raw sockets throughout: a silent socket, half a request head, a one-byte trickle, idle
keep-alive and HTTP/2 connections, and floods past `max_connections`. Each timeout is
set short and every other one long, so a socket that closes within the (generous) wait
can only have been closed by the limit under test; nothing asserts how fast.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time

import grpc
import pytest

from tests.support.grpc_calls import GrpcCaller
from tests.support.hostile_service import Hostile
from tests.support.raw_sockets import (
    connect,
    exchange,
    http_request,
    open_fds,
    parse_reply,
    read_until_closed,
    rss_kib,
    wait_until,
)
from tests.support.servers import serving, spawn_cli

#: How long a test waits for a socket the server should close (generous: loaded CI).
WAIT = 30.0
LONG = 600.0
HALF_HEAD = b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"
ECHO = http_request("/echo", b'{"text": "hi"}', {"Content-Type": "application/json"})
KEEP_ALIVE_ECHO = ECHO.replace(b"Connection: close", b"Connection: keep-alive")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def frames(data: bytes) -> list[tuple[int, bytes]]:
    """(type, payload) of each whole HTTP/2 frame in `data`."""
    out = []
    while len(data) >= 9:
        length = int.from_bytes(data[:3], "big")
        if len(data) < 9 + length:
            break
        out.append((data[3], data[9:9 + length]))
        data = data[9 + length:]
    return out


def still_open(sock: socket.socket, wait: float = 0.3) -> bool:
    try:
        read_until_closed(sock, wait)
    except TimeoutError:
        return True
    return False


# ---------------------------------------------------------------- HTTP
@pytest.fixture(scope="module")
def heads():
    """Short header deadline, long keep-alive: a close can only be the deadline's."""
    with serving(Hostile, header_timeout=1.0, http_keepalive_timeout=LONG) as running:
        yield running


def test_silent_http_socket_is_closed(heads):
    with connect(heads.http_port) as sock:
        assert read_until_closed(sock, WAIT) == b""  # closed, and nothing said


def test_half_a_head_gets_408_and_is_closed(heads):
    with connect(heads.http_port) as sock:
        sock.sendall(HALF_HEAD)
        reply = parse_reply(read_until_closed(sock, WAIT))
    assert reply.status == 408
    assert b"the request head did not arrive within 1 s" in reply.body


def test_a_trickled_head_does_not_extend_the_deadline(heads):
    head = ECHO.split(b"\r\n\r\n")[0]
    with connect(heads.http_port) as sock:
        deadline = time.monotonic() + WAIT
        closed = False
        for byte in head:
            if time.monotonic() > deadline:
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # the server closed it under our feet
                closed = True
                break
            time.sleep(0.2)  # one byte every 0.2 s: ~19 s for this head
        if not closed:
            closed = not still_open(sock, WAIT)
    assert closed


def test_next_head_on_a_kept_alive_connection_has_a_deadline(heads):
    with connect(heads.http_port) as sock:
        sock.sendall(KEEP_ALIVE_ECHO)
        time.sleep(0.2)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"hi")
        sock.sendall(HALF_HEAD)  # the next request starts, and stalls
        reply = parse_reply(read_until_closed(sock, WAIT))
    assert reply.status == 408


def test_requests_in_time_are_untouched(heads):
    # a whole head sent at once, and a slow method: neither is the header deadline's
    assert exchange(heads.http_port, ECHO).body == b"hi"
    with connect(heads.http_port) as sock:
        sock.sendall(KEEP_ALIVE_ECHO)
        time.sleep(2.5)  # idle past header_timeout, within keep-alive
        assert sock.recv(65536).endswith(b"hi")
        sock.sendall(ECHO)
        assert parse_reply(read_until_closed(sock, WAIT)).body == b"hi"


def test_a_stalled_body_closes_the_connection():
    with serving(Hostile, header_timeout=LONG, http_body_timeout=1.0) as server, \
            connect(server.http_port) as sock:
        head = ECHO.split(b"\r\n\r\n")[0].replace(b"Content-Length: 14",
                                                    b"Content-Length: 100")
        sock.sendall(head + b'\r\n\r\n{"text": ')  # then nothing more
        read_until_closed(sock, WAIT)


def test_a_slow_steady_body_is_not_a_stalled_one():
    with serving(Hostile, header_timeout=LONG, http_body_timeout=1.0) as server, \
            connect(server.http_port) as sock:
        body = b'{"text": "' + b"x" * 40 + b'"}'
        sock.sendall(http_request("/echo", b"", {"Content-Type": "application/json"})
                     .replace(b"Content-Length: 0", f"Content-Length: {len(body)}".encode()))
        for i in range(0, len(body), 8):  # 7 pieces, 0.4 s apart: 2.8 s in all
            time.sleep(0.4)
            sock.sendall(body[i:i + 8])
        assert parse_reply(read_until_closed(sock, WAIT)).body == b"x" * 40


def test_idle_keep_alive_connection_is_closed():
    with serving(Hostile, header_timeout=LONG, http_keepalive_timeout=1.0) as server:
        with connect(server.http_port) as sock:
            sock.sendall(KEEP_ALIVE_ECHO)
            data = read_until_closed(sock, WAIT)  # answered, then closed when idle
        assert parse_reply(data).body == b"hi"


def test_http_connections_beyond_the_limit_get_503():
    with serving(Hostile, header_timeout=LONG, max_connections=4, retry_after=3) as server:
        held = [connect(server.http_port) for _ in range(4)]
        try:
            assert wait_until(lambda: all(still_open(s, 0.05) for s in held), 5)
            with connect(server.http_port) as extra:
                data = read_until_closed(extra, WAIT)  # refused before any request
            reply = parse_reply(data)
            assert reply.status == 503
            assert "Retry-After: 3" in reply.head
            assert b"at most 4" in reply.body
            assert all(still_open(s, 0.05) for s in held)
        finally:
            for s in held:
                s.close()
        # the slots come back as connections close
        assert wait_until(lambda: exchange(server.http_port, ECHO).status == 200, WAIT)


def _reply_on(sock: socket.socket) -> int:
    """Read one whole response off a kept-alive connection (by Content-Length); its
    status."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return parse_reply(data).status


def test_at_the_connection_cap_the_longest_idle_keep_alive_connection_makes_room():
    """A pool of idle keep-alive connections at the cap does not lock a new client out:
    the longest-idle one is closed (nginx's rule) and the new client served."""
    with serving(Hostile, header_timeout=LONG, http_keepalive_timeout=LONG,
                 max_connections=4) as server:
        pool = [connect(server.http_port) for _ in range(4)]
        try:
            for s in pool:  # each serves a request, then idles: pool[0] the longest
                s.sendall(KEEP_ALIVE_ECHO)
                assert _reply_on(s) == 200
                time.sleep(0.02)
            for oldest in range(2):  # each newcomer stays, so the next finds the cap
                pool.append(connect(server.http_port))
                pool[-1].sendall(KEEP_ALIVE_ECHO)
                assert _reply_on(pool[-1]) == 200  # not 503
                assert read_until_closed(pool[oldest], WAIT) == b""  # closed, no answer
                assert all(still_open(s, 0.05) for s in pool[oldest + 1:])
            # the ones left still serve their clients
            for s in pool[2:]:
                s.sendall(KEEP_ALIVE_ECHO)
                assert _reply_on(s) == 200
        finally:
            for s in pool:
                s.close()


def test_at_the_connection_cap_with_every_connection_busy_a_new_one_gets_503(
        tmp_path, monkeypatch):
    """Requests in flight on every connection: nothing to close, so the new client is
    refused (503 + Retry-After) and the busy ones are answered in full."""
    from tests.support.gate_service import GATE_ENV, Gate

    gate = tmp_path / "gate"
    monkeypatch.setenv(GATE_ENV, str(gate))
    hold = http_request("/hold", b"{}", {"Content-Type": "application/json"})
    with serving(Gate, header_timeout=LONG, http_keepalive_timeout=LONG,
                 max_connections=4) as server:
        busy = [connect(server.http_port) for _ in range(4)]
        try:
            for s in busy:
                s.sendall(hold)
            assert wait_until(lambda: server.runtime.admission.in_flight == 4, WAIT)
            with connect(server.http_port) as extra:
                reply = parse_reply(read_until_closed(extra, WAIT))
            assert reply.status == 503 and "Retry-After" in reply.head
            gate.touch()
            for s in busy:
                reply = parse_reply(read_until_closed(s, WAIT))
                assert reply.status == 200 and reply.body == b"released"
        finally:
            for s in busy:
                s.close()


# ---------------------------------------------------------------- gRPC
def test_grpc_silent_and_half_handshakes_are_closed():
    with serving(Hostile, header_timeout=1.0, grpc_max_connection_idle=LONG,
                 http=False) as server:
        with connect(server.grpc_port) as silent:
            read_until_closed(silent, WAIT)
        with connect(server.grpc_port) as half:
            half.sendall(PREFACE[:10])
            read_until_closed(half, WAIT)
        caller = GrpcCaller(server.spec, server.grpc_target)
        assert caller.call("echo", {"text": "still serving"}) == "still serving"
        caller.close()


def test_grpc_idle_connection_gets_goaway():
    with serving(Hostile, header_timeout=LONG, grpc_max_connection_idle=1.0,
                 grpc_max_concurrent_streams=7, http=False) as server, \
            connect(server.grpc_port) as sock:
        sock.sendall(PREFACE + EMPTY_SETTINGS)  # a complete handshake, then no call
        received = frames(read_until_closed(sock, WAIT))
    kinds = [kind for kind, _ in received]
    assert 0x7 in kinds, kinds  # GOAWAY, then closed
    settings = dict(struct.unpack(">HI", p[i:i + 6]) for kind, p in received if kind == 0x4
                    for i in range(0, len(p), 6))
    assert settings.get(0x3) == 7  # SETTINGS_MAX_CONCURRENT_STREAMS


def test_grpc_connections_beyond_the_limit_are_refused():
    with serving(Hostile, header_timeout=LONG, max_connections=3, http=False) as server:
        held = [connect(server.grpc_port) for _ in range(3)]
        for s in held:
            s.sendall(PREFACE + EMPTY_SETTINGS)
        try:
            assert wait_until(lambda: all(still_open(s, 0.05) for s in held), 5)
            with connect(server.grpc_port) as extra:
                extra.sendall(PREFACE + EMPTY_SETTINGS)
                assert frames(read_until_closed(extra, WAIT)) == []  # closed unanswered
        finally:
            for s in held:
                s.close()

        def served() -> bool:
            caller = GrpcCaller(server.spec, server.grpc_target)
            try:
                return caller.call("echo", {"text": "x"}, timeout=5) == "x"
            except grpc.RpcError:
                return False
            finally:
                caller.close()

        assert wait_until(served, WAIT)


# ---------------------------------------------------------------- resources
def flood(server, count: int) -> list[socket.socket]:
    """`count` sockets on each port that never finish a request (a third send half)."""
    socks = []
    for i in range(count):
        for port in (server.http_port, server.grpc_port):
            sock = connect(port)
            if i % 3 == 1:
                sock.sendall(HALF_HEAD if port == server.http_port else PREFACE[:10])
            socks.append(sock)
    return socks


@contextlib.contextmanager
def worker(**settings: str):
    """A server process (its descriptors and memory are its own), warmed up; settings
    come as TENSORWIRE_* environment variables."""
    env = {f"TENSORWIRE_{k.upper()}": v for k, v in settings.items()}
    server = spawn_cli("tests.support.hostile_service:Hostile", env=env)
    socks: list[socket.socket] = []
    try:
        assert exchange(server.http_port, ECHO).body == b"hi"
        yield server, server.process.pid, socks
        for sock in socks:
            sock.close()
        # still serving once the flood is gone
        assert wait_until(lambda: exchange(server.http_port, ECHO).status == 200, WAIT)
    finally:
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.close()
        server.stop()


@pytest.mark.slow
def test_a_flood_of_idle_sockets_leaves_no_descriptors_behind():
    """300 sockets on each port that never finish a request: once the header deadline
    passes the worker holds no more descriptors than before, and its memory barely
    moved. (Before: aiohttp kept them for its 3630 s keep-alive, grpc for 120 s.)"""
    with worker(header_timeout="2", http_keepalive_timeout="600",
                grpc_max_connection_idle="600") as (server, pid, socks):
        base_fds, base_rss = open_fds(pid), rss_kib(pid)
        socks += flood(server, 300)
        assert wait_until(lambda: open_fds(pid) <= base_fds + 4, WAIT), (
            base_fds, open_fds(pid))
        assert rss_kib(pid) - base_rss < 64 * 1024


@pytest.mark.slow
def test_max_connections_caps_the_descriptors_a_flood_holds():
    """With the deadlines long, 300 idle sockets on each port: the worker keeps 100 per
    protocol and closes the rest as they come."""
    with worker(header_timeout="600", max_connections="100", http_keepalive_timeout="600",
                grpc_max_connection_idle="600") as (server, pid, socks):
        base_fds = open_fds(pid)
        socks += flood(server, 300)
        assert wait_until(lambda: open_fds(pid) <= base_fds + 2 * 100 + 4, WAIT), (
            base_fds, open_fds(pid))
        held = sum(still_open(s, 0.01) for s in socks)
        assert held <= 2 * 100 + 4, held
