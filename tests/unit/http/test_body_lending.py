"""`ProtocolBase.read_into`: a request body read straight from the socket, on a real
loopback connection to aiohttp's own protocol (no app, no envelope): the bytes land in
the buffer whole, the connection parses its next request, a handler cancelled mid-body
gives the transport back and closes the connection, and a client that half-closes
fails the read."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import numpy as np
from aiohttp import web

from tensorwire.http.aiohttp_compat import ProtocolBase

BODY = bytes(range(256)) * 8192  # 2 MiB, more than aiohttp buffers before it pauses


async def _serve(handler: Any) -> tuple[asyncio.AbstractServer, int, list[ProtocolBase]]:
    loop = asyncio.get_running_loop()
    manager = web.Server(handler)
    made: list[ProtocolBase] = []

    def protocol() -> ProtocolBase:
        made.append(ProtocolBase(manager, loop=loop))
        return made[-1]

    server = await loop.create_server(protocol, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], made


def _head(n: int, path: str = "/") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n".encode()


async def test_the_body_lands_whole_and_the_next_request_parses() -> None:
    got: list[bytes] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        buf = np.empty(request.content_length or 0, np.uint8)
        protocol = request.protocol
        assert isinstance(protocol, ProtocolBase)
        n = await protocol.read_into(request.content, memoryview(buf),
                                     request.content_length or 0)
        got.append(buf[:n].tobytes())
        return web.Response(text=str(n))

    server, port, _ = await _serve(handler)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_head(len(BODY)) + BODY + _head(5) + b"hello")  # pipelined
    await writer.drain()
    answers = []
    for _ in range(2):
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        answers.append((head.split(b"\r\n")[0], await reader.readexactly(length)))
    writer.close()
    server.close()
    assert answers == [(b"HTTP/1.1 200 OK", str(len(BODY)).encode()),
                       (b"HTTP/1.1 200 OK", b"5")]
    assert got == [BODY, b"hello"]


async def test_a_read_cancelled_mid_body_gives_the_transport_back_and_closes() -> None:
    """The handler survives its read's cancellation and answers: the answer must not go
    out on a connection whose parser is still inside the body, nor the lender keep the
    transport (and the buffer)."""
    started = asyncio.Event()
    reading: list[asyncio.Task[Any]] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        protocol = request.protocol
        assert isinstance(protocol, ProtocolBase)
        buf = np.empty(request.content_length or 0, np.uint8)
        task = asyncio.ensure_future(protocol.read_into(
            request.content, memoryview(buf), request.content_length or 0))
        reading.append(task)
        started.set()
        try:
            await task
        except asyncio.CancelledError:
            pass
        return web.Response(text="answered anyway")

    server, port, made = await _serve(handler)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(_head(len(BODY)) + BODY[: len(BODY) // 2])
    await asyncio.wait_for(started.wait(), 10)
    for _ in range(100):  # until the rest of the body is awaited from the socket
        transport = made[0].transport
        if transport is not None and transport.get_protocol() is not made[0]:
            break
        await asyncio.sleep(0.01)
    assert transport is not None and transport.get_protocol() is not made[0]
    reading[0].cancel()
    await asyncio.sleep(0.2)
    assert transport.is_closing()
    sock.settimeout(10)
    assert sock.recv(1 << 16) == b""  # closed, no answer: its parser is inside the body
    sock.close()
    server.close()


async def test_a_client_that_half_closes_mid_body_fails_the_read() -> None:
    failed: list[BaseException] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        protocol = request.protocol
        assert isinstance(protocol, ProtocolBase)
        buf = np.empty(request.content_length or 0, np.uint8)
        try:
            await protocol.read_into(request.content, memoryview(buf),
                                     request.content_length or 0)
        except ConnectionResetError as exc:
            failed.append(exc)
            raise
        return web.Response()

    server, port, _ = await _serve(handler)
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(_head(len(BODY)) + BODY[: len(BODY) // 2])
    await asyncio.sleep(0.2)
    sock.shutdown(socket.SHUT_WR)
    for _ in range(100):
        if failed:
            break
        await asyncio.sleep(0.02)
    sock.close()
    server.close()
    assert failed and "mid-body" in str(failed[0])
