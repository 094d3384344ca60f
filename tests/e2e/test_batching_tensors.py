"""Batching of NumPy, torch and DataFrame inputs under 64 concurrent clients, both wires."""

from __future__ import annotations

import asyncio
import threading
import time
import typing as t

import aiohttp
import numpy as np
import pandas as pd
import pytest
import torch

import tensorwire
from tensorwire.validators import DataframeSchema, DType, Shape
from tests.support.grpc_calls import GrpcCaller
from tests.support.servers import serving

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
Rows = t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]
TRows = t.Annotated[torch.Tensor, Shape((-1, 4)), DType("float32")]
Cols = t.Annotated[np.ndarray, Shape((4, -1)), DType("float32")]
Frame = t.Annotated[pd.DataFrame, DataframeSchema(orient="records", columns=["a", "b"])]
Scores = t.Annotated[pd.DataFrame, DataframeSchema(orient="records", columns=["score"])]
CALLS: dict[str, list[int]] = {}
LOCK = threading.Lock()


def seen(api: str, n: int) -> None:
    with LOCK:
        CALLS.setdefault(api, []).append(n)
    time.sleep(0.02)  # the fixed cost batching amortises; long enough for calls to overlap


@tensorwire.service
class Batched:
    @tensorwire.api(batchable=True, max_batch_size=32)
    def np_linear(self, x: Rows) -> np.ndarray:
        seen("np_linear", len(x))
        return x @ W

    @tensorwire.api
    def np_linear_one(self, x: Rows) -> np.ndarray:
        return x @ W

    @tensorwire.api(batchable=True, max_batch_size=32)
    def torch_linear(self, x: TRows) -> torch.Tensor:
        seen("torch_linear", x.shape[0])
        return x @ torch.from_numpy(W)

    @tensorwire.api(batchable=True, max_batch_size=32, batch_dim=(1, 0))
    def columns(self, x: Cols) -> np.ndarray:
        seen("columns", x.shape[1])
        return x.sum(axis=0)  # items along dim 1 in, along dim 0 out

    @tensorwire.api(batchable=True, max_batch_size=32)
    def frame_score(self, df: Frame) -> Scores:
        seen("frame_score", len(df))
        return pd.DataFrame({"score": df["a"] * 10 + df["b"]})


@pytest.fixture(scope="module")
def server():
    with serving(Batched, threads=4) as s:
        yield s


def rows(i: int) -> np.ndarray:
    k = 1 + i % 3  # requests carry 1..3 items each
    return (np.arange(4 * k, dtype=np.float32).reshape(k, 4) + i) / 7


CASES = {
    "np_linear": (lambda i: {"x": rows(i)}, lambda v: v["x"] @ W),
    "torch_linear": (lambda i: {"x": torch.from_numpy(rows(i))}, lambda v: v["x"].numpy() @ W),
    "columns": (lambda i: {"x": np.ascontiguousarray(rows(i).T)}, lambda v: v["x"].sum(axis=0)),
    "frame_score": (lambda i: {"df": pd.DataFrame({"a": [i, i + 1][: 1 + i % 2],
                                                   "b": [0.5, 1.5][: 1 + i % 2]})},
                    lambda v: pd.DataFrame({"score": v["df"]["a"] * 10 + v["df"]["b"]})),
}


def to_json(values: dict[str, t.Any]) -> dict[str, t.Any]:
    out = {}
    for k, v in values.items():
        if isinstance(v, pd.DataFrame):
            out[k] = v.to_dict(orient="records")
        elif isinstance(v, torch.Tensor):
            out[k] = v.tolist()
        else:
            out[k] = v.tolist()
    return out


def same(api: str, got: t.Any, want: t.Any) -> None:
    if isinstance(want, pd.DataFrame):
        got = got if isinstance(got, pd.DataFrame) else pd.DataFrame(got)
        np.testing.assert_allclose(got["score"].to_numpy(float), want["score"].to_numpy(float))
    else:
        np.testing.assert_allclose(np.asarray(got, dtype=np.float32), want, rtol=1e-6)


@pytest.mark.parametrize("api", list(CASES))
async def test_64_http_clients(server, api):
    make, expect = CASES[api]
    inputs = [make(i) for i in range(64)]
    before = len(CALLS.get(api, []))
    async with aiohttp.ClientSession() as session:
        async def call(values):
            async with session.post(f"{server.http_url}/{api}", json=to_json(values)) as r:
                assert r.status == 200, await r.text()
                return await r.json()

        results = await asyncio.gather(*(call(v) for v in inputs))
    for values, got in zip(inputs, results, strict=True):
        same(api, got, expect(values))
    sizes = CALLS[api][before:]
    assert max(sizes) > 1, f"{api}: concurrent requests should share model calls"


@pytest.mark.parametrize("api", list(CASES))
def test_64_grpc_clients(server, api):
    make, expect = CASES[api]
    inputs = [make(i) for i in range(64)]
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        before = len(CALLS.get(api, []))
        results: dict[int, t.Any] = {}
        start = threading.Barrier(64)

        def worker(i: int) -> None:
            start.wait()
            results[i] = caller.call(api, inputs[i])

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    for i, values in enumerate(inputs):
        same(api, results[i], expect(values))
    assert max(CALLS[api][before:]) > 1


def test_batched_equals_unbatched(server):
    # Equal to float32 rounding: BLAS may sum in another order for another batch shape.
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        for i in range(8):
            x = rows(i)
            a = caller.call("np_linear", {"x": x})
            b = caller.call("np_linear_one", {"x": x})
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_a_request_larger_than_max_batch_size_is_split(server):
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        before = len(CALLS.get("np_linear", []))
        x = np.random.default_rng(0).random((100, 4), dtype=np.float32)
        np.testing.assert_allclose(caller.call("np_linear", {"x": x}), x @ W, rtol=1e-6)
    assert all(n <= 32 for n in CALLS["np_linear"][before:])
