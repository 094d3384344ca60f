"""The load clients count every failed call, by kind, and never as throughput.

Each client runs against a small server in this process that fails some calls on
purpose and counts what it answered; the client's failed calls must equal the server's
failures exactly, and its requests/s must count only the calls that succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools

import grpc
from aiohttp import web

from bench.support.load import grpc_client, http_client

METHOD = "/bench.Flaky/Call"
STREAM = "/bench.Flaky/Tokens"


def timing(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"concurrency": 4, "duration": 0.3, "warmup": 0.1,
                                 "stream": False, "expect_chunks": 0, **kw})


async def http_server(handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/call", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/call"


async def test_http_client_counts_error_answers_and_leaves_them_out_of_rps():
    sent = {"ok": 0, "refused": 0}
    turn = itertools.count()

    async def flaky(request: web.Request) -> web.Response:
        await request.read()
        if next(turn) % 3 == 0:
            sent["refused"] += 1
            return web.json_response({"error": "the queue is full"}, status=503)
        sent["ok"] += 1
        return web.json_response({"ok": True})

    runner, url = await http_server(flaky)
    try:
        out = await http_client.run(timing(url=url, body="{}"))
    finally:
        await runner.cleanup()
    assert sent["refused"] > 0
    assert out["errors"] == sent["refused"]  # warm-up and measured calls alike
    assert out["error_kinds"] == {"status 503": sent["refused"]}
    assert "queue is full" in out["first_error"]
    assert out["requests"] <= sent["ok"]  # successes of the measured window only
    assert out["rps"] == out["requests"] / out["elapsed_s"]


async def test_http_client_counts_short_streams_and_error_events():
    turn = itertools.count()

    async def tokens(request: web.Request) -> web.StreamResponse:
        await request.read()
        n = next(turn)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunks = 4 if n % 3 == 0 else 8  # every third stream ends short
        for i in range(chunks):
            await resp.write(b"data: %d\n\n" % i)
        if n % 3 == 1:  # ... and every third fails mid-way
            await resp.write(b'event: error\ndata: {"error": "model failed"}\n\n')
        await resp.write_eof()
        return resp

    runner, url = await http_server(tokens)
    try:
        out = await http_client.run(timing(url=url, body="{}", stream=True,
                                           expect_chunks=8))
    finally:
        await runner.cleanup()
    total = next(turn)  # streams the server started
    assert out["error_kinds"]["short stream"] == len(range(0, total, 3))
    assert out["error_kinds"]["error event"] == len(range(1, total, 3))
    assert out["errors"] == out["error_kinds"]["short stream"] + out["error_kinds"][
        "error event"]
    assert out["tokens"] == 8 * out["requests"]  # only whole streams count


async def grpc_server(unary, stream) -> tuple[grpc.aio.Server, str]:
    handler = grpc.method_handlers_generic_handler("bench.Flaky", {
        "Call": grpc.unary_unary_rpc_method_handler(unary),
        "Tokens": grpc.unary_stream_rpc_method_handler(stream)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def test_grpc_client_counts_rpc_errors_by_status_code():
    sent = {"ok": 0, "refused": 0}
    turn = itertools.count()

    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if next(turn) % 4 == 0:
            sent["refused"] += 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "refused on purpose")
        sent["ok"] += 1
        return request

    async def stream(request: bytes, context: grpc.aio.ServicerContext):
        yield request

    server, target = await grpc_server(unary, stream)
    try:
        out = await grpc_client.run(timing(target=target, method=METHOD, request_hex="0a00"))
    finally:
        await server.stop(None)
    assert sent["refused"] > 0
    assert out["errors"] == sent["refused"]
    assert out["error_kinds"] == {"rpc UNAVAILABLE": sent["refused"]}
    assert out["requests"] <= sent["ok"]
    assert out["rps"] == out["requests"] / out["elapsed_s"]


async def test_grpc_client_counts_short_streams():
    turn = itertools.count()

    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def stream(request: bytes, context: grpc.aio.ServicerContext):
        short = next(turn) % 2 == 0
        for _ in range(3 if short else 6):
            yield b"x"
            await asyncio.sleep(0)

    server, target = await grpc_server(unary, stream)
    try:
        out = await grpc_client.run(timing(target=target, method=STREAM, request_hex="",
                                           stream=True, expect_chunks=6))
    finally:
        await server.stop(None)
    started = next(turn)
    assert out["error_kinds"] == {"short stream": len(range(0, started, 2))}
    assert out["tokens"] == 6 * out["requests"]
