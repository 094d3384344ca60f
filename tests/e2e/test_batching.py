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
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        start = len(SEEN)
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
    assert [results[i] for i in range(64)] == expected
    assert max(SEEN[start:]) > 1


def test_a_failing_batch_is_internal_and_the_next_one_works(server):
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        with pytest.raises(grpc.RpcError) as info:
            caller.call("score", {"rows": [[-1e10]]})
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert "model failure" not in (info.value.details() or "")
        assert caller.call("score", {"rows": [[1.0, 2.0]]}) == [3.0]


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
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        with pytest.raises(grpc.RpcError) as info:
            caller.call("score", {"rows": "not rows"})
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_locs(info.value) == [["rows"]]


def test_a_lone_request_is_not_held(server):
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        time.sleep(0.05)  # nothing else in flight
        assert caller.call("score", {"rows": [[1.0, 1.0]]}) == [2.0]
    stats = server.runtime.batcher("score").stats
    assert stats.batch_sizes[-1] == 1
    assert stats.queue_waits[-1] < 0.2  # dispatched at once, far inside max_latency_ms


SLOW_SEEN: list[list[float]] = []


@tensorwire.service
class SlowScorer:
    """A 0.4 s model, to catch requests while it runs (queued, cancelled, refused)."""

    @tensorwire.api(batchable=True, max_batch_size=4, max_latency_ms=10)
    def slow(self, xs: list[float]) -> list[float]:
        with LOCK:
            SLOW_SEEN.append(list(xs))
        time.sleep(0.4)
        return [x + 1 for x in xs]


@pytest.fixture(scope="module")
def slow_server():
    with serving(SlowScorer, threads=4, batch_queue_items=6) as s:
        yield s


def _grpc_future(server, values: dict) -> tuple[GrpcCaller, grpc.Future]:
    caller = GrpcCaller(server.spec, server.grpc_target)
    return caller, caller.future("slow", values, timeout=10)


async def test_a_queued_request_whose_client_leaves_never_reaches_the_model(slow_server):
    url = f"{slow_server.http_url}/slow"
    async with aiohttp.ClientSession() as session:
        async def call(xs: list[float], timeout: float = 10) -> tuple[int, object]:
            async with session.post(url, json={"xs": xs},
                                    timeout=aiohttp.ClientTimeout(total=timeout)) as r:
                return r.status, await r.json()

        first = asyncio.create_task(call([1.0]))  # the model is busy with it for 0.4 s
        await asyncio.sleep(0.1)
        with pytest.raises(asyncio.TimeoutError):  # HTTP: the client hangs up, queued
            await call([-7.0], timeout=0.1)
        caller, doomed = _grpc_future(slow_server, {"xs": [-8.0]})  # gRPC: cancelled
        try:
            await asyncio.sleep(0.05)
            assert doomed.cancel()
            kept = asyncio.create_task(call([2.0]))
            assert await first == (200, [2.0])
            assert await kept == (200, [3.0])
        finally:
            caller.close()
    seen = [x for batch in SLOW_SEEN for x in batch]
    assert -7.0 not in seen and -8.0 not in seen, SLOW_SEEN
    assert 2.0 in seen


async def test_a_full_queue_is_503_and_resource_exhausted(slow_server):
    url = f"{slow_server.http_url}/slow"
    async with aiohttp.ClientSession() as session:
        async def call(xs: list[float]) -> tuple[int, dict, object]:
            async with session.post(url, json={"xs": xs}) as r:
                return r.status, dict(r.headers), await r.json()

        first = asyncio.create_task(call([1.0]))  # runs
        await asyncio.sleep(0.1)
        queued = [asyncio.create_task(call([1.0, 1.0, 1.0])) for _ in range(2)]  # 6 items
        await asyncio.sleep(0.1)
        status, headers, body = await call([5.0])
        assert status == 503 and headers.get("Retry-After") == "1", body
        assert "queue is full" in body["error"]
        with GrpcCaller(slow_server.spec, slow_server.grpc_target) as caller:
            with pytest.raises(grpc.RpcError) as info:
                caller.call("slow", {"xs": [5.0]}, timeout=5)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await first)[0] == 200
        assert [r[0] for r in await asyncio.gather(*queued)] == [200, 200]
    assert 5.0 not in [x for batch in SLOW_SEEN for x in batch]


def test_a_lone_request_waits_far_less_than_a_10_ms_budget(slow_server):
    time.sleep(0.5)  # whatever ran before is done: the model is idle
    with GrpcCaller(slow_server.spec, slow_server.grpc_target) as caller:
        assert caller.call("slow", {"xs": [3.0]}, timeout=5) == [4.0]
    stats = slow_server.runtime.batcher("slow").stats
    assert stats.batch_sizes[-1] == 1
    assert stats.queue_waits[-1] < 0.010  # dispatched at once, inside max_latency_ms=10
