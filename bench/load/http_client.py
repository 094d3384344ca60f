"""aiohttp load client (used when wrk is absent, and for SSE streams).

    python -m bench.load.http_client --url URL --concurrency 16 --duration 5 [--stream]

`concurrency` coroutines share one connection pool of that size, each sending requests
back to back (closed loop, like wrk). Prints `WARM` after the warm-up, then one JSON line:
unary: requests/s and latency percentiles over *all* samples; stream: tokens/s (SSE
events) and time-to-first-chunk percentiles.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time

import aiohttp

from bench.common import percentile


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _unary(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict,
                 stats: dict) -> None:
    t0 = time.perf_counter()
    async with session.post(url, data=body, headers=headers) as resp:
        await resp.read()
        ok = resp.status == 200
    stats["lat"].append(time.perf_counter() - t0)
    if not ok:
        stats["errors"] += 1


async def _stream(session: aiohttp.ClientSession, url: str, body: bytes, headers: dict,
                  stats: dict) -> None:
    t0 = time.perf_counter()
    first = None
    events = 0
    tail = b""
    async with session.post(url, data=body, headers=headers) as resp:
        if resp.status != 200:
            await resp.read()
            stats["errors"] += 1
            return
        async for chunk in resp.content.iter_any():
            data = tail + chunk
            n = data.count(b"\n\n")
            if n and first is None:
                first = time.perf_counter() - t0
            events += n
            tail = data[-1:]
    stats["lat"].append(time.perf_counter() - t0)
    stats["ttfc"].append(first if first is not None else float("nan"))
    stats["tokens"] += events


async def run(args: argparse.Namespace) -> dict:
    body = args.body.encode()
    headers = {"Content-Type": "application/json"}
    call = _stream if args.stream else _unary
    connector = aiohttp.TCPConnector(limit=args.concurrency, force_close=False)
    async with aiohttp.ClientSession(connector=connector) as session:
        async def loop(deadline: float, stats: dict) -> None:
            while time.perf_counter() < deadline:
                try:
                    await call(session, args.url, body, headers, stats)
                except aiohttp.ClientError:
                    stats["errors"] += 1

        def fresh() -> dict:
            return {"lat": [], "ttfc": [], "errors": 0, "tokens": 0}

        warm = fresh()
        deadline = time.perf_counter() + args.warmup
        await asyncio.gather(*(loop(deadline, warm) for _ in range(args.concurrency)))
        print("WARM", flush=True)
        stats = fresh()
        cpu0 = _cpu()
        start = time.perf_counter()
        deadline = start + args.duration
        await asyncio.gather(*(loop(deadline, stats) for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - start
        cpu = _cpu() - cpu0
    lat = sorted(stats["lat"])
    out = {
        "requests": len(lat),
        "errors": stats["errors"],
        "elapsed_s": elapsed,
        "rps": len(lat) / elapsed,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p90_ms": percentile(lat, 90) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "max_ms": (lat[-1] if lat else float("nan")) * 1e3,
        "client_cpu": cpu / elapsed,
        "samples": len(lat),
    }
    if args.stream:
        ttfc = sorted(stats["ttfc"])
        out.update(tokens=stats["tokens"], tokens_per_s=stats["tokens"] / elapsed,
                   ttfc_p50_ms=percentile(ttfc, 50) * 1e3,
                   ttfc_p90_ms=percentile(ttfc, 90) * 1e3,
                   ttfc_p99_ms=percentile(ttfc, 99) * 1e3,
                   ttfc_mean_ms=sum(ttfc) / len(ttfc) * 1e3 if ttfc else float("nan"))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--body", required=True)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--stream", action="store_true")
    args = p.parse_args(argv)
    print(json.dumps(asyncio.run(run(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
