"""The start-up baseline: the numpy model behind a bare aiohttp app and a bare grpc.aio
server in one process, each with a readiness endpoint and nothing else.

`python -m bench.support.baselines.bare_numpy --http-port P --grpc-port Q` — the least a hand-made
two-protocol numpy server must import and build before it can answer.
"""

from __future__ import annotations

import argparse
import asyncio

import grpc
import numpy as np
from aiohttp import web
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


async def serve(host: str, http_port: int, grpc_port: int) -> None:
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)  # the "model"

    async def classify(request: web.Request) -> web.Response:
        x = np.asarray(await request.json(), dtype=np.float32).reshape(-1, 4)
        return web.json_response((x @ w).tolist())

    async def readyz(_: web.Request) -> web.Response:
        return web.json_response({"status": "ready"})

    app = web.Application()
    app.router.add_post("/classify", classify)
    app.router.add_get("/readyz", readyz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, http_port).start()

    server = grpc.aio.server()
    checker = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    server.add_insecure_port(f"{host}:{grpc_port}")
    await server.start()
    await checker.set("", health_pb2.HealthCheckResponse.SERVING)
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.http_port, args.grpc_port))


if __name__ == "__main__":
    main()
