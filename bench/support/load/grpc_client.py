"""grpc.aio load client: `concurrency` coroutines on one channel, back-to-back calls.

    python -m bench.support.load.grpc_client --target 127.0.0.1:50051 \
        --method /bench.Bench/Predict \
        --request-hex 0911... --concurrency 16 --duration 5 [--stream]

Requests are pre-serialized bytes and replies are left as bytes (no serializers), so the
client spends as little CPU as grpc.aio allows and sends identical bytes to both servers.
Prints `WARM` after the warm-up, then one JSON line (percentiles over the calls that
succeeded). Every failed call is counted by kind (`errors`, `error_kinds`, warm-up
included): an RPC error of any status, any other exception (the client's deadline too),
and with `--expect-chunks N` a stream that ended with another number of messages.
Requests/s and latencies count successful calls only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import grpc

from bench.support.load.closed_loop import measure


async def run(args: argparse.Namespace) -> dict:
    request = bytes.fromhex(args.request_hex)
    async with grpc.aio.insecure_channel(args.target) as channel:
        if args.stream:
            method = channel.unary_stream(args.method)
        else:
            method = channel.unary_unary(args.method)

        async def unary(stats: dict) -> None:
            t0 = time.perf_counter()
            await method(request, timeout=30)
            stats["lat"].append(time.perf_counter() - t0)

        async def stream(stats: dict) -> None:
            t0 = time.perf_counter()
            first = None
            n = 0
            async for _ in method(request, timeout=60):
                if first is None:
                    first = time.perf_counter() - t0
                n += 1
            if args.expect_chunks and n != args.expect_chunks:
                stats["failures"].add("short stream" if n < args.expect_chunks
                                      else "long stream", f"{n} of {args.expect_chunks}")
                return
            stats["lat"].append(time.perf_counter() - t0)
            stats["ttfc"].append(first if first is not None else float("nan"))
            stats["tokens"] += n

        call = stream if args.stream else unary
        await channel.channel_ready()
        return await measure(call, args.concurrency, args.warmup, args.duration, args.stream)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--target", required=True)
    p.add_argument("--method", required=True)
    p.add_argument("--request-hex", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--expect-chunks", type=int, default=0,
                   help="with --stream: a stream of another length is a failed call")
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
