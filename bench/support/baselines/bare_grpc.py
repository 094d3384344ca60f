"""The bare grpc.aio baseline: a servicer on a protoc-generated stub, same validation.

`python -m bench.support.baselines.bare_grpc --port 50061 [--stubs DIR]` (stubs compiled into a
temp dir when not given). Each handler validates the present fields with the same
pydantic model as the HTTP sides and answers with the generated message class; `def`
work runs in an 8-thread pool, as tensorwire's does.
"""

from __future__ import annotations

import argparse
import asyncio
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from pydantic import ValidationError

from bench.support.baselines import new_loop
from bench.support.model import FEATURES, TOKEN, PredictRequest, classify

from .stubs import compile_stubs, load_stubs

_executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="bare-api")


def make_servicer(pb, pb_grpc):
    class BareBench(pb_grpc.BenchServicer):
        @staticmethod
        async def _validate(request, context) -> PredictRequest:
            values = {n: getattr(request, n) for n in FEATURES if request.HasField(n)}
            try:
                return PredictRequest.model_validate(values)
            except ValidationError as exc:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
                raise  # unreachable: abort raises

        @staticmethod
        def _predict(req: PredictRequest):
            p = classify(req.sepal_length, req.sepal_width, req.petal_length,
                         req.petal_width)
            return pb.Prediction(label=p.label, score=p.score)

        async def Predict(self, request, context):
            return self._predict(await self._validate(request, context))

        async def PredictSync(self, request, context):
            req = await self._validate(request, context)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_executor, self._predict, req)

        async def Tokens(self, request, context):
            n = request.n if request.HasField("n") else 16
            for _ in range(n):
                yield pb.Token(result=TOKEN)

        async def TokensSync(self, request, context):
            n = request.n if request.HasField("n") else 16
            loop = asyncio.get_running_loop()
            gen = (TOKEN for _ in range(n))
            while (tok := await loop.run_in_executor(_executor, next, gen, None)) is not None:
                yield pb.Token(result=tok)

    return BareBench()


async def serve(host: str, port: int, stub_dir: str | None) -> None:
    pb, pb_grpc = load_stubs(stub_dir or compile_stubs())
    server = grpc.aio.server()
    pb_grpc.add_BenchServicer_to_server(make_servicer(pb, pb_grpc), server)
    checker = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    if not server.add_insecure_port(f"{host}:{port}"):
        raise OSError(f"cannot bind {host}:{port}")
    await server.start()
    await checker.set("", health_pb2.HealthCheckResponse.SERVING)
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--stubs", default=None, help="directory made by compile_stubs")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = parser.parse_args()
    with asyncio.Runner(loop_factory=lambda: new_loop(args.loop)) as runner:
        runner.run(serve(args.host, args.port, args.stubs))


if __name__ == "__main__":
    main()
