"""Adaptive batching over both protocols: merged calls, same answers as unbatched."""

from __future__ import annotations

import asyncio
import threading
import time

import aiohttp
import grpc
import pytest

import tensorwire
from tests.support.grpc_calls import GrpcCaller, error_locs
from tests.support.servers import serving

SEEN: list[int] = []
LOCK = threading.Lock()


@tensorwire.service
class Scorer:
    @tensorwire.api(batchable=True, max_batch_size=16, max_latency_ms=200)
    def score(self, rows: list[list[float]]) -> list[float]:
        with LOCK:
            SEEN.append(len(rows))
        time.sleep(0.02)  # a fixed cost per call is what batching amortises
        if any(r and r[0] < -1e9 for r in rows):
            raise RuntimeError("model failure")
        return [sum(r) for r in rows]

    @tensorwire.api
    def score_one(self, rows: list[list[float]]) -> list[float]:
        return [sum(r) for r in rows]


@pytest.fixture(scope="module")
def server():
    with serving(Scorer, threads=4) as s:
        yield s


def requests(n: int) -> list[list[list[float]]]:
    return [[[float(i), float(j)] for j in range(1 + i % 3)] for i in range(n)]


async def test_64_concurrent_http_clients_get_unbatched_answers(server):
    inputs = requests(64)
    start = len(SEEN)
    async with aiohttp.ClientSession() as session:
        async def call(api, rows):
            async with session.post(f"{server.http_url}/{api}", json={"rows": rows}) as r:
                assert r.status == 200, await r.text()
                return await r.json()

        batched = await asyncio.gather(*(call("score", rows) for rows in inputs))
        plain = await asyncio.gather(*(call("score_one", rows) for rows in inputs))
    assert batched == plain
    sizes = SEEN[start:]
    assert sum(sizes) == sum(len(r) for r in inputs)
    assert max(sizes) > 1, "concurrent requests should share model calls"
    assert max(sizes) <= 16


def test_64_concurrent_grpc_clients_get_unbatched_answers(server):
    inputs = requests(64)
    caller = GrpcCaller(server.spec, server.grpc_target)
    start = len(SEEN)
    try:
        results: dict[int, list[float]] = {}

        start_line = threading.Barrier(64)

        def worker(i: int) -> None:
            start_line.wait()
            results[i] = caller.call("score", {"rows": inputs[i]})

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        expected = [caller.call("score_one", {"rows": rows}) for rows in inputs]
    finally:
        caller.close()
    assert [results[i] for i in range(64)] == expected
    assert max(SEEN[start:]) > 1


def test_a_failing_batch_is_internal_and_the_next_one_works(server):
    caller = GrpcCaller(server.spec, server.grpc_target)
    try:
        with pytest.raises(grpc.RpcError) as info:
            caller.call("score", {"rows": [[-1e10]]})
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert "model failure" not in (info.value.details() or "")
        assert caller.call("score", {"rows": [[1.0, 2.0]]}) == [3.0]
    finally:
        caller.close()


async def test_validation_happens_before_batching(server):
    async with aiohttp.ClientSession() as session:
        async def call(rows):
            async with session.post(f"{server.http_url}/score", json={"rows": rows}) as r:
                return r.status, await r.json()

        results = await asyncio.gather(call([[1.0]]), call([["x"]]), call([[2.0]]))
    assert results[0] == (200, [1.0])
    assert results[1][0] == 400
    assert results[1][1]["detail"][0]["loc"] == ["rows", 0, 0]
    assert results[2] == (200, [2.0])


def test_grpc_validation_error_names_the_field(server):
    caller = GrpcCaller(server.spec, server.grpc_target)
    try:
        with pytest.raises(grpc.RpcError) as info:
            caller.call("score", {"rows": "not rows"})
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_locs(info.value) == [["rows"]]
    finally:
        caller.close()


def test_a_lone_request_is_not_held(server):
    caller = GrpcCaller(server.spec, server.grpc_target)
    try:
        time.sleep(0.05)  # nothing else in flight
        assert caller.call("score", {"rows": [[1.0, 1.0]]}) == [2.0]
    finally:
        caller.close()
    stats = server.runtime.batcher("score").stats
    assert stats.batch_sizes[-1] == 1
    assert stats.queue_waits[-1] < 0.2  # dispatched at once, far inside max_latency_ms
