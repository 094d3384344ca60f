"""The servers `bench/streams_in.py` compares: one bidirectional API, three ways.

Every message is a frame of 16 float32 samples; every answer is the frame's sum (a
float). The work per message is the same on all three; what differs is what is around
it:

- tensorwire: `StreamsBench.sums` (`AsyncIterator[Annotated[np.ndarray, Shape((16,)),
  DType("float32")]] -> AsyncGenerator[float]`), served by `tensorwire serve` over gRPC
  (a bidirectional rpc) and HTTP (the API's WebSocket); each element validated by its
  codec, the plan's element stream, the envelopes' accounting;
- bare grpc.aio: a `stream_stream` generic handler reading the same request messages
  (tensorwire's generated classes, so the bytes on the wire are identical), summing
  `np.frombuffer(tensor.data)`, writing the same response message;
- bare aiohttp: a `WebSocketResponse` handler reading the same JSON text messages
  (`orjson.loads`, `np.asarray(..., float32)`), answering `orjson.dumps(sum)`.

    python -m bench.support.streams_in_servers bare-grpc PORT
    python -m bench.support.streams_in_servers bare-ws PORT
"""

from __future__ import annotations

import asyncio
import sys
import typing as t
from collections.abc import AsyncGenerator, AsyncIterator

import numpy as np

import tensorwire
from tensorwire.validators import DType, Shape

SAMPLES = 16
Frame = t.Annotated[np.ndarray, Shape((SAMPLES,)), DType("float32")]


@tensorwire.service(name="streams_bench")
class StreamsBench:
    """One bidirectional API for the per-message bench."""

    @tensorwire.api
    async def sums(self, frames: AsyncIterator[Frame]) -> AsyncGenerator[float, None]:
        """The sum of each frame, as it comes."""
        async for frame in frames:
            yield float(frame.sum())


def messages() -> tuple[type, type]:
    """The request and response classes of `sums` (tensorwire's generated ones)."""
    from tensorwire.protobuf.descriptors import service_proto

    api = service_proto(tensorwire.get_service_spec(StreamsBench)).messages["sums"]
    return api.request_cls, api.response_cls


async def bare_grpc(port: int) -> None:
    import grpc

    request_cls, response_cls = messages()

    async def sums(requests: AsyncIterator[bytes], context: t.Any) -> AsyncIterator[bytes]:
        async for data in requests:
            tensor = request_cls.FromString(data).frames
            yield response_cls(result=float(np.frombuffer(tensor.data, np.float32).sum())
                               ).SerializeToString()

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "streams_bench.StreamsBench",
        {"Sums": grpc.stream_stream_rpc_method_handler(sums)}),))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("serving", flush=True)
    await server.wait_for_termination()


async def bare_ws(port: int) -> None:
    import orjson
    from aiohttp import WSMsgType, web

    async def sums(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(compress=False)
        await ws.prepare(request)
        async for msg in ws:
            if msg.type is WSMsgType.BINARY and not msg.data:
                break
            frame = np.asarray(orjson.loads(msg.data), np.float32)
            await ws.send_str(orjson.dumps(float(frame.sum())).decode())
        await ws.close()
        return ws

    async def ready(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/sums", sums)
    app.router.add_get("/readyz", ready)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    print("serving", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    kind, port = sys.argv[1], int(sys.argv[2])
    asyncio.run({"bare-grpc": bare_grpc, "bare-ws": bare_ws}[kind](port))
