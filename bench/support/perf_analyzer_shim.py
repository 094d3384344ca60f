"""A shim in front of a v2 server that lacks Triton's configuration and statistics
extensions (MLServer 1.7), so that perf_analyzer runs against it at all.

    .venv/bin/python -m bench.support.perf_analyzer_shim --http-upstream http://127.0.0.1:8080 \\
        --grpc-upstream 127.0.0.1:8081 --http-port 9080 --grpc-port 9081

perf_analyzer asks for the model configuration before anything else and for the
server's statistics around every measurement window; MLServer answers neither (404 /
"Method not found!"). The shim answers both and passes every other request through,
byte for byte, on both protocols:

- the configuration is made from the model's metadata (`max_batch_size` 0, each input
  and output with its datatype and its metadata shape as `dims`), as the issue that
  asked for tensorwire's own put it;
- the statistics count what passed through the shim: each model's successful and
  failed inferences and their time from the shim's side (so they include the upstream
  connection), all of it as `compute_infer`; `queue`, `compute_input` and
  `compute_output` count every request with no time (perf_analyzer finds the version
  that served it by the queue count, and wants the compute counts alike).

bench/perf_analyzer.py runs tensorwire both directly and behind this shim, so the cost
of the extra hop shows beside MLServer's numbers. tritonclient's compiled protos describe
the gRPC messages (a bench-only dependency: tritonclient is in the dev extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import defaultdict
from typing import Any

import aiohttp
import grpc
from aiohttp import web
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2 as mc
from tritonclient.grpc import service_pb2 as pb

SERVICE = "inference.GRPCInferenceService"
TYPES = {"BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8", "UINT16": "TYPE_UINT16",
         "UINT32": "TYPE_UINT32", "UINT64": "TYPE_UINT64", "INT8": "TYPE_INT8",
         "INT16": "TYPE_INT16", "INT32": "TYPE_INT32", "INT64": "TYPE_INT64",
         "FP16": "TYPE_FP16", "FP32": "TYPE_FP32", "FP64": "TYPE_FP64",
         "BYTES": "TYPE_STRING"}
#: Hop-by-hop headers a proxy does not pass on.
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Counts:
    """What passed through, per model: (successes, their ns, failures, their ns)."""

    def __init__(self) -> None:
        self.models: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])

    def add(self, model: str, ok: bool, ns: int) -> None:
        entry = self.models[model]
        entry[0 if ok else 2] += 1
        entry[1 if ok else 3] += ns

    def stats(self, name: str) -> dict[str, Any]:
        names = [name] if name else list(self.models)
        out = []
        for model in names:
            ok, ok_ns, fail, fail_ns = self.models[model]
            duration = {"count": ok, "ns": ok_ns}
            none = {"count": ok, "ns": 0}  # perf_analyzer wants every count alike
            zero = {"count": 0, "ns": 0}
            out.append({
                "name": model, "version": "1", "last_inference": int(time.time() * 1000),
                "inference_count": ok, "execution_count": ok,
                "inference_stats": {
                    "success": duration, "fail": {"count": fail, "ns": fail_ns},
                    "queue": none, "compute_input": none, "compute_infer": duration,
                    "compute_output": none, "cache_hit": zero, "cache_miss": zero},
                "batch_stats": []})
        return {"model_stats": out}


def config_of(metadata: dict[str, Any]) -> dict[str, Any]:
    """Triton's model configuration, from v2 model metadata."""
    def tensors(key: str) -> list[dict[str, Any]]:
        return [{"name": t["name"], "data_type": TYPES.get(t["datatype"], "TYPE_INVALID"),
                 "dims": [int(d) for d in t["shape"]]} for t in metadata.get(key, [])]

    return {"name": metadata["name"], "platform": metadata.get("platform", ""),
            "max_batch_size": 0, "input": tensors("inputs"), "output": tensors("outputs")}


# ---------------------------------------------------------------------- HTTP


def http_app(upstream: str, counts: Counts) -> web.Application:
    session: dict[str, aiohttp.ClientSession] = {}

    async def start(_: web.Application) -> None:
        session["s"] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            auto_decompress=False)

    async def stop(_: web.Application) -> None:
        await session["s"].close()

    async def config(request: web.Request) -> web.Response:
        model = request.match_info["model"]
        async with session["s"].get(f"{upstream}/v2/models/{model}") as reply:
            if reply.status != 200:
                return web.Response(status=reply.status, body=await reply.read())
            return web.json_response(config_of(await reply.json()))

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(counts.stats(request.match_info.get("model", "")))

    async def proxy(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        began = time.perf_counter_ns()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        async with session["s"].request(request.method, f"{upstream}{request.rel_url}",
                                        data=body, headers=headers) as reply:
            payload = await reply.read()
            out = {k: v for k, v in reply.headers.items() if k.lower() not in HOP}
        if request.path.endswith("/infer"):
            model = request.path.split("/")[3]
            counts.add(model, reply.status == 200, time.perf_counter_ns() - began)
        return web.Response(status=reply.status, body=payload, headers=out)

    app = web.Application(client_max_size=1 << 30)
    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version}"):
        app.router.add_get(base + "/config", config)
        app.router.add_get(base + "/stats", stats)
    app.router.add_get("/v2/models/stats", stats)
    app.router.add_route("*", "/{path:.*}", proxy)
    return app


# ---------------------------------------------------------------------- gRPC


class GrpcShim(grpc.GenericRpcHandler):
    """ModelConfig and ModelStatistics answered here, every other rpc passed through."""

    def __init__(self, channel: grpc.aio.Channel, counts: Counts) -> None:
        self.channel = channel
        self.counts = counts

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        if not method.startswith(f"/{SERVICE}/"):
            return None
        name = method.rsplit("/", 1)[1]
        if name == "ModelConfig":
            return grpc.unary_unary_rpc_method_handler(self.config)
        if name == "ModelStatistics":
            return grpc.unary_unary_rpc_method_handler(self.stats)
        if name == "ModelStreamInfer":
            return None
        forward = self.channel.unary_unary(method)
        infer = name == "ModelInfer"

        async def passed(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            began = time.perf_counter_ns()
            model = pb.ModelInferRequest.FromString(data).model_name if infer else ""
            try:
                reply = await forward(data, metadata=context.invocation_metadata())
            except grpc.aio.AioRpcError as exc:
                if infer:
                    self.counts.add(model, False, time.perf_counter_ns() - began)
                await context.abort(exc.code(), exc.details() or "")
            if infer:
                self.counts.add(model, True, time.perf_counter_ns() - began)
            return reply

        return grpc.unary_unary_rpc_method_handler(passed)

    async def config(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        ask = pb.ModelConfigRequest.FromString(data)
        meta = pb.ModelMetadataResponse.FromString(await self.channel.unary_unary(
            f"/{SERVICE}/ModelMetadata")(
                pb.ModelMetadataRequest(name=ask.name).SerializeToString()))
        metadata = json_format.MessageToDict(meta, preserving_proto_field_name=True)
        config = json_format.ParseDict(config_of(metadata), mc.ModelConfig())
        return pb.ModelConfigResponse(config=config).SerializeToString()

    async def stats(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        ask = pb.ModelStatisticsRequest.FromString(data)
        reply = json_format.ParseDict(self.counts.stats(ask.name),
                                      pb.ModelStatisticsResponse())
        return reply.SerializeToString()


async def main(args: argparse.Namespace) -> None:
    http_counts, grpc_counts = Counts(), Counts()
    runner = web.AppRunner(http_app(args.http_upstream, http_counts), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.http_port).start()
    options = [("grpc.max_receive_message_length", 1 << 30),
               ("grpc.max_send_message_length", 1 << 30)]
    channel = grpc.aio.insecure_channel(args.grpc_upstream, options=options)
    server = grpc.aio.server(options=options)
    server.add_generic_rpc_handlers((GrpcShim(channel, grpc_counts),))
    server.add_insecure_port(f"127.0.0.1:{args.grpc_port}")
    await server.start()
    print(json.dumps({"shim": "ready"}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http-upstream", required=True)
    parser.add_argument("--grpc-upstream", required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    asyncio.run(main(parser.parse_args()))
