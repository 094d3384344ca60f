"""Is a port free? Asked before anything listens, so that a port in use is one clear line.

Why a probe: `--workers N` servers listen with SO_REUSEPORT, and Linux lets every socket
of the same user that also sets it bind the same address. A second `--workers N` server
started on the ports of a running one would therefore bind too, and the kernel would split
new connections between two different services, silently. A socket bound *without*
SO_REUSEPORT is refused (EADDRINUSE) while any other socket holds the address: a
listening worker of any server, or a supervisor's reservation. So the supervisor, and a
one-worker server, first bind such a probe to each port, close it, and only then bind as
they mean to; whichever server comes second is refused, however many workers either has.

SO_REUSEADDR on the probe: connections of an earlier server still in TIME_WAIT do not
count as "in use" (the servers set it themselves), a listening socket still does.

The window between the probe and the real bind is one process' next few system calls; a
server started in that same instant is not caught by this check.
"""

from __future__ import annotations

import socket


class BindError(OSError):
    """A port cannot be listened on (in use, not permitted, no such address).

    Its own class so that start-up reports it as such, and never mistakes another
    OSError (a model's missing weights file in `__init__`) for a port problem.
    """


def cannot_listen(protocol: str, host: str, port: int, why: str) -> BindError:
    """The one line a port problem is told in, for both protocols and every start-up."""
    return BindError(f"cannot listen for {protocol} on {host}:{port}: {why}")


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def _address(host: str, port: int) -> tuple[int, int, int, tuple]:
    family, kind, proto, _, addr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    return family, kind, proto, addr


def check_free(protocol: str, host: str, port: int) -> None:
    """Raise `BindError` naming the port unless nothing else holds host:port.

    Port 0 asks the kernel for a free port: there is nothing to check.
    """
    if port == 0:
        return
    family, kind, proto, addr = _address(host, port)
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError as exc:
            raise cannot_listen(protocol, host, port, _reason(exc)) from None


def reserve(protocol: str, host: str, port: int) -> socket.socket:
    """The supervisor's hold on a port its workers will share: checked free first, then
    bound (never listening) with SO_REUSEPORT, so that port 0 resolves once for every
    worker and the workers' own SO_REUSEPORT binds join it."""
    check_free(protocol, host, port)
    family, kind, proto, addr = _address(host, port)
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(addr)
    except OSError as exc:
        sock.close()
        raise cannot_listen(protocol, host, port, _reason(exc)) from None
    return sock
