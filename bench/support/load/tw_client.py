"""tensorwire client load: `concurrency` coroutines on one AsyncClient, back-to-back calls.

    python -m bench.support.load.tw_client --url grpc://127.0.0.1:50051 --api predict \
        --kwargs '{"sepal_length": 5.1, ...}' --concurrency 16 --duration 5 [--channels N]

What a production Python client of tensorwire sends: its own AsyncClient with its
default channel pool (or `--channels N`). Prints `WARM` after the warm-up, then one JSON
line (the format of `bench.support.load.grpc_client`): every call that raised, whatever the
exception, is a failed call counted by kind; requests/s counts the others.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import tensorwire
from bench.support.load.closed_loop import measure


async def run(args: argparse.Namespace) -> dict:
    kwargs = json.loads(args.kwargs)
    options = {"channels": args.channels} if args.channels else {}
    async with tensorwire.AsyncClient(args.url, **options) as client:
        method = getattr(client, args.api)

        async def call(stats: dict) -> None:
            t0 = time.perf_counter()
            await method(**kwargs)  # a typed server error or anything else: failed
            stats["lat"].append(time.perf_counter() - t0)

        return await measure(call, args.concurrency, args.warmup, args.duration)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--api", required=True)
    p.add_argument("--kwargs", default="{}", help="the call's inputs, as a JSON object")
    p.add_argument("--channels", type=int, default=0, help="0: the client's default")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
