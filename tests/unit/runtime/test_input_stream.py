"""The plan's input-stream step (`RequestPlan.feed`, `runtime.input_stream`): elements
validated one by one as the method pulls them, located at their index when invalid,
bounded in count and idle time, never read ahead, and a `def` method woken when the
call ends under it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

import tensorwire
from tensorwire.contract.decoding import Decoder
from tensorwire.errors import DeadlineExceeded, InvalidArgument, PayloadTooLarge
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tests.support.stream_services import Streams, seen


class Raw:
    """A transport's raw elements: values sent when the test says, counting pulls."""

    def __init__(self, items: list[Any] = (), *, gap: float = 0.0, hold: bool = False):
        self.items = list(items)
        self.gap = gap
        self.hold = hold  # after the items: wait forever (a client that stops sending)
        self.pulled = 0

    def __aiter__(self) -> Raw:
        return self

    async def __anext__(self) -> Any:
        if self.gap:
            await asyncio.sleep(self.gap)
        if self.pulled >= len(self.items):
            if self.hold:
                await asyncio.Event().wait()
            raise StopAsyncIteration
        self.pulled += 1
        return self.items[self.pulled - 1]


async def started(**settings: Any) -> ServiceRuntime:
    runtime = ServiceRuntime(tensorwire.get_service_spec(Streams), Settings(**settings))
    await runtime.start()
    return runtime


def decoder(runtime: ServiceRuntime, name: str):
    """What a transport hands `feed`: one raw element (here: its Python value) -> the
    validated arguments of a one-element call."""
    api = runtime.spec.apis[name]
    validate = Decoder(api).read_values_decoder()
    field = api.stream_input.name
    return lambda raw, scope: validate({field: raw})


async def call(runtime: ServiceRuntime, name: str, raw: AsyncIterator[Any],
               ctx: Any = None) -> Any:
    plan = runtime.plan(name)
    kwargs = plan.feed(raw, decoder(runtime, name), plan.scope if ctx is None else ctx)
    finished, value = plan.run(kwargs, ctx, None)
    return value if finished else await value


def frames(*rows: list[float]) -> list[np.ndarray]:
    return [np.array(r, np.float32) for r in rows]


async def test_each_element_is_validated_and_summed():
    runtime = await started()
    try:
        assert await call(runtime, "total", Raw(frames([1, 2], [3]))) == 6.0
        assert await call(runtime, "total", Raw([])) == 0.0  # an empty stream is a stream
        # a `def` method iterates the same elements with `for`, in the pool
        summary = await call(runtime, "average", Raw([{"sensor": "a", "value": 1},
                                                      {"sensor": "b", "value": 3}]))
        assert summary.model_dump() == {"count": 2, "mean": 2.0, "sensors": ["a", "b"]}
    finally:
        await runtime.close()


async def test_an_invalid_element_ends_the_call_naming_its_index():
    runtime = await started()
    try:
        raw = Raw([{"sensor": "a", "value": 1}, {"sensor": "b", "value": 1},
                   {"sensor": "c", "value": 500}, {"sensor": "d", "value": 1}])
        with pytest.raises(InvalidArgument) as info:
            await call(runtime, "average", raw)
        err = info.value
        assert err.detail[0]["loc"] == ["readings", 2, "value"]
        assert err.message.startswith("readings.2.value: Input should be less than")
        assert raw.pulled == 3  # nothing read past the bad element
        with pytest.raises(InvalidArgument) as info:  # a tensor of the wrong rank
            await call(runtime, "total", Raw([np.zeros(2, np.float32),
                                              np.zeros((2, 2), np.float32)]))
        assert info.value.detail[0]["loc"][:2] == ["frames", 1]
    finally:
        await runtime.close()


async def test_nothing_is_read_ahead_of_the_method():
    """A slow consumer holds the client back: one element taken per step."""
    runtime = await started()
    try:
        raw = Raw([{"sensor": "a", "value": 1}] * 50)
        plan = runtime.plan("scaled")
        kwargs = plan.feed(raw, decoder(runtime, "scaled"), plan.scope)
        stream = plan.open(kwargs, None)
        first = await anext(stream.chunks)
        assert first.sensor == "A" and raw.pulled == 1
        await anext(stream.chunks)
        assert raw.pulled == 2
        await stream.aclose()
    finally:
        await runtime.close()


async def test_more_elements_than_the_limit_is_payload_too_large():
    runtime = await started(max_stream_elements=3)
    try:
        with pytest.raises(PayloadTooLarge, match="more than 3 elements"):
            await call(runtime, "total", Raw(frames([1], [1], [1], [1])))
        assert await call(runtime, "total", Raw(frames([1], [1], [1]))) == 3.0
    finally:
        await runtime.close()


async def test_a_client_that_stops_sending_ends_the_call_after_the_idle_limit():
    runtime = await started(stream_idle_timeout=0.2)
    try:
        began = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="no element of 'frames' came within"):
            await call(runtime, "total", Raw(frames([1]), hold=True))
        assert 0.15 < time.monotonic() - began < 2
        # slow but steady: each wait is under the limit, the whole call far over it
        assert await call(runtime, "total", Raw(frames(*[[1]] * 8), gap=0.05)) == 8.0
    finally:
        await runtime.close()


async def test_waiting_for_the_client_is_not_the_methods_time():
    """request_timeout bounds the method's work: a stream that takes longer because
    the client is slow is not cut (a unary call of that length would be)."""
    runtime = await started(request_timeout=0.2)
    try:
        assert await call(runtime, "total", Raw(frames(*[[1]] * 6), gap=0.08)) == 6.0
        ctx = runtime.context(_info("slow"))
        with pytest.raises(DeadlineExceeded):  # 50 ms per element of its own: 0.4 s
            await call(runtime, "slow_sum", Raw(frames(*[[1]] * 8)), ctx)
        ctx.close()
    finally:
        await runtime.close()


async def test_a_def_method_waiting_for_an_element_is_woken_when_the_call_ends():
    runtime = await started()
    try:
        ctx = runtime.context(_info("cancel-def"))
        task = asyncio.ensure_future(call(runtime, "blocking_sum", Raw(frames([1]), hold=True),
                                          ctx))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if seen("cancel-def")["taken"] == 1:
                break
        await asyncio.sleep(0.05)  # the thread now waits for element 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):  # the thread raised Cancelled at its `for` and returned
            if seen("cancel-def")["ended"] is not None:
                break
            await asyncio.sleep(0.01)
        assert seen("cancel-def")["ended"] == "cancelled"
        ctx.close()
    finally:
        await runtime.close()


def _info(tag: str) -> Any:
    from tensorwire.context import Headers, RequestInfo

    return RequestInfo("grpc", "test", Headers(lambda: [("x-tag", tag)]), lambda: "peer")
