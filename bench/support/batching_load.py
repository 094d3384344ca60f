"""Load generator for bench/batching.py (its own process): N concurrent clients.

Prints one JSON line: successful requests, failed calls (`errors`, by kind in
`error_kinds`: non-2xx answers, RPC errors, any exception, wrk's socket errors and
timeouts), seconds and latency percentiles of the successful calls. HTTP load comes
from `wrk` where installed (a Python client saturates its own core first and inflates
the tail it measures), else from an aiohttp client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import Failures

X = np.arange(4, dtype=np.float32).reshape(1, 4)


def summary(latencies: list[float], failures: Failures, seconds: float) -> dict:
    lat = sorted(latencies)

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else float("nan")

    return {"requests": len(lat), **failures.report(), "seconds": seconds,
            "rps": len(lat) / seconds, "p50_ms": pct(0.50), "p99_ms": pct(0.99)}


async def http_load(url: str, concurrency: int, seconds: float) -> dict:
    import aiohttp

    body = json.dumps({"x": X.tolist()}).encode()
    headers = {"Content-Type": "application/json"}
    latencies: list[float] = []
    failures = Failures()
    stop = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        async def client() -> None:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                try:
                    async with session.post(url, data=body, headers=headers) as r:
                        answer = await r.read()
                except Exception as exc:  # every failure kind counts, none stops the load
                    failures.exception(exc)
                    continue
                if not 200 <= r.status < 300:
                    failures.add(f"status {r.status}", answer[:200].decode(errors="replace"))
                    continue
                latencies.append(time.perf_counter() - t0)

        start = time.monotonic()
        await asyncio.gather(*(client() for _ in range(concurrency)))
    return summary(latencies, failures, time.monotonic() - start)


async def grpc_load(target: str, method: str, concurrency: int, seconds: float) -> dict:
    import grpc

    from tensorwire.v1 import DType, Tensor

    request = Tensor(dtype=DType.values_by_name["FLOAT32"].number, shape=list(X.shape),
                     data=X.tobytes())
    # The request message has one field, x = 1 (a Tensor): encode it by hand so the
    # load generator needs no generated code.
    payload = request.SerializeToString()
    wire = b"\x0a" + _varint(len(payload)) + payload
    latencies: list[float] = []
    failures = Failures()
    stop = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(method)

        async def client() -> None:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                try:
                    await call(wire, timeout=30)
                except Exception as exc:  # RPC errors and anything else: a failed call
                    failures.exception(exc)
                    continue
                latencies.append(time.perf_counter() - t0)

        start = time.monotonic()
        await asyncio.gather(*(client() for _ in range(concurrency)))
    return summary(latencies, failures, time.monotonic() - start)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def wrk_load(url: str, concurrency: int, seconds: float) -> dict | None:
    import os
    import shutil
    import subprocess

    wrk = shutil.which("wrk")
    if wrk is None:
        return None
    script = Path(__file__).with_name("batching_wrk.lua")
    out = subprocess.run(
        [wrk, "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "--latency", "-s", str(script),
         url], capture_output=True, text=True, check=True,
        env={**os.environ, "BENCH_BODY": json.dumps({"x": X.tolist()})})
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    failures = Failures()
    for kind, n in raw["errors"].items():
        failures.add(f"wrk {kind}", count=n)
    ok = max(0, raw["requests"] - raw["errors"]["status"])  # error answers are not served
    return {"requests": ok, **failures.report(), "seconds": raw["seconds"],
            "rps": ok / raw["seconds"], "p50_ms": raw["p50_ms"], "p99_ms": raw["p99_ms"],
            "load": "wrk"}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("protocol", choices=["http", "grpc"])
    p.add_argument("target")  # URL, or host:port for gRPC
    p.add_argument("--method", default="")  # gRPC method path
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--seconds", type=float, default=5.0)
    a = p.parse_args()
    if a.protocol == "http":
        result = wrk_load(a.target, a.concurrency, a.seconds) or asyncio.run(
            http_load(a.target, a.concurrency, a.seconds))
    else:
        result = asyncio.run(grpc_load(a.target, a.method, a.concurrency, a.seconds))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
