"""aiohttp load client (used when wrk is absent, and for SSE streams).

    python -m bench.support.load.http_client --url URL --concurrency 16 --duration 5 [--stream]

`concurrency` coroutines share one connection pool of that size, each sending requests
back to back (closed loop, like wrk). Prints `WARM` after the warm-up, then one JSON line:
unary: requests/s and latency percentiles over the calls that succeeded; stream: tokens/s
(SSE events) and time-to-first-chunk percentiles. Every failed call is counted by kind
(`errors`, `error_kinds`, warm-up included) and left out of requests/s and latencies: an
answer other than 2xx, any exception (connection reset, the client's timeout, a broken
stream), a stream carrying an `event: error`, and with `--expect-chunks N` a stream of
another number of events.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import aiohttp

from bench.support.load.closed_loop import measure

#: A call the server never answers fails after this long instead of hanging the load.
TIMEOUT = aiohttp.ClientTimeout(total=60)


async def _unary(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict,
                 stats: dict, expect: int = 0) -> None:
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as resp:
        answer = await resp.read()
    if not 200 <= resp.status < 300:
        stats["failures"].add(f"status {resp.status}", answer[:200].decode(errors="replace"))
        return
    stats["lat"].append(time.perf_counter() - t0)


async def _stream(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict,
                  stats: dict, expect: int = 0) -> None:
    t0 = time.perf_counter()
    first = None
    events = 0
    tail = b""  # the last byte: a "\n\n" split across reads still ends one event
    seen = b""  # the last bytes: an "event: error" split across reads is still seen
    failed = False
    async with session.post(url, data=body, headers=headers) as resp:
        if not 200 <= resp.status < 300:
            answer = await resp.read()
            stats["failures"].add(f"status {resp.status}",
                                  answer[:200].decode(errors="replace"))
            return
        async for chunk in resp.content.iter_any():
            data = tail + chunk
            n = data.count(b"\n\n")
            if n and first is None:
                first = time.perf_counter() - t0
            events += n
            tail = data[-1:]
            seen = seen[-12:] + chunk
            failed = failed or b"event: error" in seen
    if failed:
        stats["failures"].add("error event", "the server failed the stream mid-way")
        return
    if expect and events != expect:
        stats["failures"].add("short stream" if events < expect else "long stream",
                              f"{events} of {expect} events")
        return
    stats["lat"].append(time.perf_counter() - t0)
    stats["ttfc"].append(first if first is not None else float("nan"))
    stats["tokens"] += events


async def run(args: argparse.Namespace) -> dict:
    body = args.body.encode()
    headers = {"Content-Type": "application/json"}
    call = _stream if args.stream else _unary
    connector = aiohttp.TCPConnector(limit=args.concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector, timeout=TIMEOUT) as session:
        async def call_once(stats: dict) -> None:
            await call(session, args.url, body, headers, stats, args.expect_chunks)

        return await measure(call_once, args.concurrency, args.warmup, args.duration,
                             args.stream)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--stream", action="store_true")
    p.add_argument("--expect-chunks", type=int, default=0,
                   help="with --stream: a stream of another number of events is a failure")
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
