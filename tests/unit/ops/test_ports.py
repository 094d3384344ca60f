"""The port check every start-up makes before it binds (`tensorwire.ops.ports`)."""

from __future__ import annotations

import socket

import pytest

from tensorwire.ops.ports import BindError, check_free, reserve


def _listening(*, reuseport: bool) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuseport:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@pytest.mark.parametrize("reuseport", [False, True])
def test_a_listening_socket_is_in_use_whatever_its_options(reuseport):
    # reuseport=True: a worker of another `--workers N` server, which a plain
    # SO_REUSEPORT bind would join instead of being refused
    with _listening(reuseport=reuseport) as held:
        port = held.getsockname()[1]
        with pytest.raises(BindError) as exc:
            check_free("gRPC", "127.0.0.1", port)
        assert str(exc.value) == (f"cannot listen for gRPC on 127.0.0.1:{port}: "
                                  "address already in use")
        with pytest.raises(BindError, match=r"HTTP on 127\.0\.0\.1"):
            reserve("HTTP", "127.0.0.1", port)


def test_a_reservation_holds_its_port_against_other_servers_but_not_its_workers():
    held = reserve("HTTP", "127.0.0.1", 0)
    port = held.getsockname()[1]
    try:
        with pytest.raises(BindError):  # another supervisor, before its workers listen
            reserve("HTTP", "127.0.0.1", port)
        worker = socket.socket()
        worker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        worker.bind(("127.0.0.1", port))  # this server's own worker joins it
        worker.close()
    finally:
        held.close()


def test_connections_left_in_time_wait_do_not_count():
    with _listening(reuseport=False) as listener:
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server closes first: its side stays in TIME_WAIT
        client.close()
    check_free("HTTP", "127.0.0.1", port)  # a restarted server may bind at once


def test_port_zero_is_always_free():
    check_free("HTTP", "127.0.0.1", 0)
