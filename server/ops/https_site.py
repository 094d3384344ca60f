"""HTTPS that answers a plain-HTTP request with a readable 400, as nginx does (its 497).

A client that speaks plain HTTP to the TLS port (`http://` where `https://` was meant)
used to see the connection close without a word: asyncio's TLS layer fails the handshake
on the request line and drops the connection. Here the site accepts connections itself
and, before any transport reads from one, waits for its first byte and peeks at it
(MSG_PEEK: the byte stays unread):

- 0x16, a TLS handshake record (the ClientHello): the socket goes to the loop as
  `create_server(ssl=)` would hand it over (`loop.connect_accepted_socket`, the same
  handshake timeout) and on to aiohttp's protocol, which never knows the difference;
- an uppercase letter, an HTTP method: answered `400` with the error model's JSON body
  ("this port speaks HTTPS ..."), then closed;
- anything else goes to TLS, which refuses it as before.

A connection that sends nothing within `header_timeout` (the time a new connection has to
deliver its request head, `tensorwire.http.connections`) is closed. Why not peek from a
`create_server` protocol: uvloop starts reading right after `connection_made`, even when
it paused reading there, so the ClientHello would be consumed before TLS could see it.

aiohttp has no hook for this: `HTTPSSite` is a `web.TCPSite` whose `start` binds and
accepts itself, so it reads the site's address and installs its own listener through
`tensorwire.http.aiohttp_compat`, the one module that touches aiohttp's internals.

The gRPC port cannot do the same: grpc core owns its sockets. A plaintext gRPC client on
a TLS port sees UNAVAILABLE (the README says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import Callable

import orjson
from aiohttp import web

from ..errors import ERROR_KIND_HEADER, InvalidArgument, error_kind
from ..http.aiohttp_compat import adopt_listener, site_address

log = logging.getLogger("tensorwire.http")

#: The first byte of every HTTP/1.x method, and of HTTP/2's prior-knowledge preface.
HTTP_METHOD_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ")
#: When `header_timeout` is off: how long a new connection may stay silent.
FIRST_BYTE_WAIT = 60.0
#: After accept() fails for want of file descriptors: as asyncio's own servers pause.
ACCEPT_RETRY_DELAY = 1.0


def plain_http_answer(port: int) -> bytes:
    """The whole HTTP/1.0 response to a plain-HTTP request: status, headers, JSON body."""
    request_id = os.urandom(8).hex()
    err = InvalidArgument(f"this port speaks HTTPS: use https://, not http:// "
                          f"(port {port})")
    body = orjson.dumps({**err.to_dict(), "request_id": request_id})
    head = ("HTTP/1.0 400 Bad Request\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"{ERROR_KIND_HEADER}: {error_kind(err)}\r\n"
            f"X-Request-ID: {request_id}\r\n"
            "Connection: close\r\n\r\n")
    return head.encode() + body


def _listening_sockets(host: str, port: int, *, backlog: int,
                       reuse_port: bool | None) -> list[socket.socket]:
    """Bound and listening, as `loop.create_server(host, port)` makes them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                               flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, addr in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(addr)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address "
                                         f"{addr!r}: {(exc.strerror or '').lower()}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class _Listener:
    """What aiohttp keeps of a site's server: its sockets, and `close()`."""

    def __init__(self, sockets: list[socket.socket], tasks: list[asyncio.Task],
                 pending: set[asyncio.Task]) -> None:
        self.sockets = sockets
        self._tasks = tasks
        self._pending = pending  # connections still waiting for their first byte

    def close(self) -> None:
        for task in [*self._tasks, *self._pending]:
            task.cancel()
        for sock in self.sockets:
            sock.close()


class HTTPSSite(web.TCPSite):
    """`web.TCPSite` that looks at each connection's first byte before TLS starts."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *,
                 ssl_context: ssl.SSLContext, reuse_port: bool | None,
                 first_byte_wait: float) -> None:
        super().__init__(runner, host, port, ssl_context=ssl_context, reuse_port=reuse_port)
        self._tls = ssl_context
        self._wait = first_byte_wait or FIRST_BYTE_WAIT
        self._pending: set[asyncio.Task] = set()

    async def start(self) -> None:
        await web.BaseSite.start(self)
        runner, host, port, backlog, reuse_port = site_address(self)
        factory = runner.server
        assert factory is not None
        loop = asyncio.get_running_loop()
        sockets = _listening_sockets(host, port, backlog=backlog, reuse_port=reuse_port)
        tasks = [loop.create_task(self._accept(sock, factory)) for sock in sockets]
        adopt_listener(self, _Listener(sockets, tasks, self._pending),
                       sockets[0].getsockname()[1])

    async def _accept(self, listener: socket.socket,
                      factory: Callable[[], asyncio.Protocol]) -> None:
        loop = asyncio.get_running_loop()
        port = listener.getsockname()[1]
        while True:
            try:
                conn, _ = await loop.sock_accept(listener)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue
            except OSError as exc:  # out of file descriptors: let some close first
                log.error("cannot accept HTTPS connections on port %d: %s; retrying in "
                          "%g s", port, exc, ACCEPT_RETRY_DELAY)
                await asyncio.sleep(ACCEPT_RETRY_DELAY)
                continue
            conn.setblocking(False)
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._first_byte(conn, factory, port))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _first_byte(self, conn: socket.socket, factory: Callable[[], asyncio.Protocol],
                          port: int) -> None:
        loop = asyncio.get_running_loop()
        handed_over = False
        try:
            first = await asyncio.wait_for(_peek(loop, conn), self._wait)
            if not first:  # closed before it said anything
                return
            if first[0] in HTTP_METHOD_START:
                await _answer_plain_http(loop, conn, port)
                return
            handed_over = True  # the loop owns the socket now, and closes it on failure
            await loop.connect_accepted_socket(factory, conn, ssl=self._tls)
        except OSError:  # TimeoutError too
            pass  # silent, reset, or a failed handshake: dropped, as before
        finally:
            if not handed_over:
                conn.close()


async def _peek(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> bytes:
    """The connection's first byte, left unread (b"" when it closed first)."""
    while True:
        try:
            return conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            pass
        await _readable(loop, conn)


async def _readable(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(conn.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(conn.fileno())


async def _answer_plain_http(loop: asyncio.AbstractEventLoop, conn: socket.socket,
                             port: int) -> None:
    """The 400, then a close that does not reset: the request head is read first (a
    close with unread bytes sends RST, which can cost the client the answer)."""
    with contextlib.suppress(BlockingIOError, InterruptedError):
        for _ in range(16):  # what has arrived, up to 1 MiB
            if not conn.recv(65536):
                break
    await loop.sock_sendall(conn, plain_http_answer(port))
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
