"""What the clients cost per call, beside bare aiohttp / grpc.aio calls in the same run.

    .venv/bin/python bench/client_overhead.py [--calls 2000]

Serves examples/quickstart.py in-process (both protocols) and times N sequential
`summarize` calls (a small JSON/protobuf request and response) through:
bare aiohttp (a reused session, orjson) and bare grpc.aio (the server's own message
classes) as baselines, AsyncClient, and SyncClient (which adds the hop to its loop
thread); then 8 threads sharing one SyncClient. Prints microseconds per call and the
ratio to the bare baseline of the same protocol, with each caller's failed calls beside
them (an error answer or any exception; a ratio over failed calls is not a figure of the
server, so any failure is reported as such). One run; numbers vary by machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
import grpc
import orjson

import tensorwire
from bench.support.common import Failures
from examples.quickstart import Quickstart
from tensorwire.protobuf.descriptors import service_proto
from tests.support.servers import serving

INPUT = {"text": "tensorwire serves one typed contract over gRPC and HTTP", "max_words": 4}


Timed = tuple[float, Failures]  # seconds for all calls, and the calls that failed


async def bare_http(url: str, n: int) -> Timed:
    failures = Failures()
    async with aiohttp.ClientSession() as session:
        body = orjson.dumps(INPUT)
        headers = {"Content-Type": "application/json"}
        start = time.perf_counter()
        for _ in range(n):
            try:
                async with session.post(url + "/summarize", data=body, headers=headers) as r:
                    answer = orjson.loads(await r.read())
                if r.status != 200:
                    failures.add(f"status {r.status}", str(answer))
            except Exception as exc:
                failures.exception(exc)
        return time.perf_counter() - start, failures


async def bare_grpc(target: str, n: int) -> Timed:
    proto = service_proto(tensorwire.get_service_spec(Quickstart))
    messages = proto.messages["summarize"]
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(proto.method_names["summarize"],
                                   request_serializer=lambda m: m.SerializeToString(),
                                   response_deserializer=messages.response_cls.FromString)
        failures = Failures()
        start = time.perf_counter()
        for _ in range(n):
            try:
                messages.response_value(await call(messages.request(INPUT)))
            except Exception as exc:
                failures.exception(exc)
        return time.perf_counter() - start, failures


async def async_client(url: str, n: int) -> Timed:
    failures = Failures()
    async with tensorwire.AsyncClient(url) as client:
        start = time.perf_counter()
        for _ in range(n):
            try:
                await client.summarize(**INPUT)
            except Exception as exc:
                failures.exception(exc)
        return time.perf_counter() - start, failures


def sync_client(url: str, n: int) -> Timed:
    failures = Failures()
    with tensorwire.SyncClient(url) as client:
        start = time.perf_counter()
        for _ in range(n):
            try:
                client.summarize(**INPUT)
            except Exception as exc:
                failures.exception(exc)
        return time.perf_counter() - start, failures


def threads(url: str, n: int, workers: int = 8) -> Timed:
    with tensorwire.SyncClient(url) as client:
        def work(_: int) -> Failures:
            failures = Failures()
            for _ in range(n // workers):
                try:
                    client.summarize(**INPUT)
                except Exception as exc:
                    failures.exception(exc)
            return failures

        start = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            each = list(pool.map(work, range(workers)))
        elapsed = time.perf_counter() - start
    failures = Failures()
    for f in each:
        failures.merge(f)
    return elapsed, failures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    n = parser.parse_args().calls
    with serving(Quickstart, threads=8) as server:
        http, grpc_url = server.http_url, f"grpc://{server.grpc_target}"
        sync_client(http, 50), sync_client(grpc_url, 50)  # warm up both stacks
        rows = [
            ("HTTP", "bare aiohttp", asyncio.run(bare_http(http, n))),
            ("HTTP", "AsyncClient", asyncio.run(async_client(http, n))),
            ("HTTP", "SyncClient", sync_client(http, n)),
            ("HTTP", "SyncClient x8 threads", threads(http, n)),
            ("gRPC", "bare grpc.aio", asyncio.run(bare_grpc(server.grpc_target, n))),
            ("gRPC", "AsyncClient", asyncio.run(async_client(grpc_url, n))),
            ("gRPC", "SyncClient", sync_client(grpc_url, n)),
            ("gRPC", "SyncClient x8 threads", threads(grpc_url, n)),
        ]
    base = {proto: seconds for proto, name, (seconds, _) in rows if name.startswith("bare")}
    print(f"{n} sequential summarize calls (threads: {n} in all), in-process server")
    print(f"{'protocol':8} {'caller':24} {'us/call':>9} {'calls/s':>9} {'failed':>7} "
          f"{'x bare':>7}")
    for proto, name, (seconds, failures) in rows:
        print(f"{proto:8} {name:24} {seconds / n * 1e6:9.0f} {n / seconds:9.0f} "
              f"{failures.total:7d} {seconds / base[proto]:7.2f}"
              + (f"  first failure: {failures.first}" if failures.first else ""))
    failed = sum(f.total for _, _, (_, f) in rows)
    if failed:
        print(f"{failed} failed calls: these timings are not the clients' cost")


if __name__ == "__main__":
    main()
