"""Batchable APIs with model inputs and outputs, through a real server on both protocols.

A model whose fields all batch is merged and split field by field; a request whose
model fields hold different numbers of items is the client's mistake (400 /
INVALID_ARGUMENT naming the model), never a 500 or a spoiled batch.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from pydantic import BaseModel

import tensorwire
from tests.support.grpc_calls import GrpcCaller
from tests.support.http_calls import post
from tests.support.servers import serving

SIZES: list[int] = []
LOCK = threading.Lock()


class Rows(BaseModel):
    a: list[float]
    b: list[float]


class Sums(BaseModel):
    total: list[float]
    doubled: list[float]


@tensorwire.service
class PairSums:
    @tensorwire.api(batchable=True, max_batch_size=32)
    def add(self, rows: Rows) -> Sums:
        with LOCK:
            SIZES.append(len(rows.a))
        time.sleep(0.01)  # long enough for concurrent requests to queue behind a call
        total = [x + y for x, y in zip(rows.a, rows.b, strict=True)]
        return Sums(total=total, doubled=[2 * t for t in total])


@pytest.fixture(scope="module")
def server():
    with serving(PairSums, threads=4) as s:
        yield s


def rows(i: int) -> dict[str, list[float]]:
    k = 1 + i % 3
    return {"a": [float(i)] * k, "b": [float(j) for j in range(k)]}


def expected(i: int) -> dict[str, list[float]]:
    r = rows(i)
    total = [x + y for x, y in zip(r["a"], r["b"], strict=True)]
    return {"total": total, "doubled": [2 * t for t in total]}


def test_model_inputs_and_outputs_batch_over_http_and_grpc(server):
    caller = GrpcCaller(server.spec, server.grpc_target)

    def over_http(i: int) -> dict:
        reply = post(server.http_url + "/add", {"rows": rows(i)})
        assert reply.status == 200, reply.body
        return reply.json()

    def over_grpc(i: int) -> dict:
        return dict(caller.call("add", {"rows": rows(i)}))

    try:
        for call in (over_http, over_grpc):
            SIZES.clear()
            with ThreadPoolExecutor(32) as pool:
                got = list(pool.map(call, range(96)))
            assert got == [expected(i) for i in range(96)]
            assert max(SIZES) > 3, SIZES  # requests of 1-3 rows shared model calls
    finally:
        caller.close()


def test_model_fields_of_different_lengths_are_a_client_error(server):
    bad = {"rows": {"a": [1.0, 2.0], "b": [1.0]}}
    reply = post(server.http_url + "/add", bad)
    assert reply.status == 400, reply.body
    assert reply.json()["detail"][0]["loc"] == ["rows"]
    assert "a=2, b=1" in reply.json()["detail"][0]["msg"]
    caller = GrpcCaller(server.spec, server.grpc_target)
    try:
        with pytest.raises(grpc.RpcError) as info:
            caller.call("add", bad)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "a=2, b=1" in info.value.details()
    finally:
        caller.close()
    assert post(server.http_url + "/add", {"rows": rows(1)}).json() == expected(1)  # still fine
