"""The dispatcher: merging, caps, splitting, isolation, cancellation, bounds."""

from __future__ import annotations

import asyncio
import typing as t

import pytest

import tensorwire
from tensorwire.errors import InternalError, InvalidArgument, Overloaded
from tensorwire.runtime.batching import Batcher, LatencyModel


@tensorwire.service
class Lists:
    @tensorwire.api(batchable=True, max_batch_size=8, max_latency_ms=1000)
    def double(self, xs: list[float], factor: float = 2.0) -> list[float]:
        return [x * factor for x in xs]


def api():
    return tensorwire.get_service_spec(Lists).apis["double"]


class Model:
    """A fake model: records each batch, takes `delay` seconds, can be told to fail."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.batches: list[list[float]] = []
        self.fail_on: float | None = None
        self.short = False

    async def __call__(self, values: dict[str, t.Any]) -> list[float]:
        self.batches.append(list(values["xs"]))
        await asyncio.sleep(self.delay)
        if self.fail_on is not None and self.fail_on in values["xs"]:
            raise RuntimeError("model exploded")
        out = [x * values["factor"] for x in values["xs"]]
        return out[:-1] if self.short else out


async def identity(value: t.Any) -> t.Any:
    return value


def batcher(model: Model, **kw: t.Any) -> Batcher:
    return Batcher(api(), model, identity, **kw)


async def test_a_lone_request_is_dispatched_at_once():
    model = Model()
    b = batcher(model)
    assert await b.submit({"xs": [1.0, 2.0], "factor": 2.0}) == [2.0, 4.0]
    assert list(b.stats.batch_sizes) == [2]
    assert b.stats.queue_waits[-1] < b.max_latency  # not held for company
    await b.close()


async def test_concurrent_requests_share_batches_and_get_their_own_results():
    model = Model(delay=0.02)
    b = batcher(model)
    results = await asyncio.gather(*(b.submit({"xs": [float(i)], "factor": 2.0})
                                     for i in range(40)))
    assert results == [[2.0 * i] for i in range(40)]
    assert max(b.stats.batch_sizes) > 1
    assert all(size <= 8 for size in b.stats.batch_sizes)
    assert sum(b.stats.batch_sizes) == 40
    assert sorted(x for batch in model.batches for x in batch) == [float(i) for i in range(40)]
    await b.close()


async def test_requests_larger_than_the_cap_are_split_and_rejoined():
    model = Model()
    b = batcher(model)
    xs = [float(i) for i in range(20)]
    assert await b.submit({"xs": xs, "factor": 1.0}) == xs
    assert all(len(batch) <= 8 for batch in model.batches)
    await b.close()


async def test_different_non_batched_inputs_are_never_merged():
    model = Model(delay=0.02)
    b = batcher(model)
    results = await asyncio.gather(*(b.submit({"xs": [1.0], "factor": float(f)})
                                     for f in (1, 2, 1, 2, 3)))
    assert results == [[1.0], [2.0], [1.0], [2.0], [3.0]]
    await b.close()


async def test_a_model_exception_fails_only_its_batch():
    model = Model(delay=0.02)
    model.fail_on = -1.0
    b = batcher(model)
    first = asyncio.ensure_future(b.submit({"xs": [5.0], "factor": 1.0}))
    await asyncio.sleep(0.005)  # the first batch is running; the next two queue together
    bad = asyncio.ensure_future(b.submit({"xs": [-1.0], "factor": 1.0}))
    good_same_batch = asyncio.ensure_future(b.submit({"xs": [3.0], "factor": 1.0}))
    assert await first == [5.0]
    with pytest.raises(InternalError):
        await bad
    with pytest.raises(InternalError):
        await good_same_batch
    assert await b.submit({"xs": [7.0], "factor": 1.0}) == [7.0]  # later batches are fine
    await b.close()


async def test_a_wrong_output_length_is_an_internal_error():
    model = Model()
    model.short = True
    b = batcher(model)
    with pytest.raises(InternalError, match="returned 1 items for a batch of 2"):
        await b.submit({"xs": [1.0, 2.0], "factor": 1.0})
    await b.close()


async def test_a_cancelled_request_leaves_the_queue():
    model = Model(delay=0.05)
    b = batcher(model)
    running = asyncio.ensure_future(b.submit({"xs": [1.0], "factor": 1.0}))
    await asyncio.sleep(0.01)
    doomed = asyncio.ensure_future(b.submit({"xs": [99.0], "factor": 1.0}))
    kept = asyncio.ensure_future(b.submit({"xs": [2.0], "factor": 1.0}))
    await asyncio.sleep(0.005)
    doomed.cancel()
    assert await running == [1.0]
    assert await kept == [2.0]
    assert all(99.0 not in batch for batch in model.batches)
    await b.close()


async def test_the_queue_is_bounded():
    model = Model(delay=0.05)
    b = batcher(model, max_queue_items=4)
    running = asyncio.ensure_future(b.submit({"xs": [1.0], "factor": 1.0}))
    await asyncio.sleep(0.01)
    waiting = [asyncio.ensure_future(b.submit({"xs": [1.0, 1.0], "factor": 1.0}))
               for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(Overloaded):
        await b.submit({"xs": [1.0], "factor": 1.0})
    await asyncio.gather(running, *waiting)
    await b.close()


async def test_mismatched_item_counts_are_invalid():
    @tensorwire.service
    class Two:
        @tensorwire.api(batchable=True)
        def pair(self, a: list[int], b: list[int]) -> list[int]:
            return [x + y for x, y in zip(a, b, strict=True)]

    spec = tensorwire.get_service_spec(Two).apis["pair"]

    async def run(values):
        return [x + y for x, y in zip(values["a"], values["b"], strict=True)]

    b = Batcher(spec, run, identity)
    assert await b.submit({"a": [1, 2], "b": [3, 4]}) == [4, 6]
    with pytest.raises(InvalidArgument) as info:
        await b.submit({"a": [1, 2], "b": [3]})
    assert [d["loc"] for d in info.value.detail] == [["a"], ["b"]]
    await b.close()


def test_latency_model_learns_fixed_and_per_item_cost():
    m = LatencyModel()
    assert m.max_items_within(0.010, 64) == 64  # no fit yet: the configured cap
    for n in (1, 4, 16, 64, 2, 32):
        m.observe(n, 0.002 + 0.0001 * n)
    a, b = m.coefficients()
    assert a == pytest.approx(0.002, rel=1e-6)
    assert b == pytest.approx(0.0001, rel=1e-6)
    assert m.max_items_within(0.010, 1000) == 101  # 1 + 10 ms / 0.1 ms per extra item
    assert m.max_items_within(0.010, 64) == 64
    assert m.max_items_within(0.0005, 64) == 6
    assert m.max_items_within(0.00001, 64) == 1  # never below one


def test_the_cap_follows_the_measured_latency():
    b = batcher(Model())
    for n in (1, 2, 4, 8):
        b.model.observe(n, 0.5 + 0.125 * n)  # 1 s budget: 1 + 1 / 0.125 = 9 items
    assert b.cap() == 8  # ... but never above max_batch_size
    slow = batcher(Model())
    for n in (1, 2, 4, 8):
        slow.model.observe(n, 5.0 + 0.25 * n)  # a fixed cost far over the budget
    assert slow.cap() == 5  # still batches: 1 + 1 s / 0.25 s


def test_a_fixed_cost_over_the_budget_does_not_stop_batching():
    m = LatencyModel()
    for n in (1, 8, 32, 64):
        m.observe(n, 0.020 + 0.00002 * n)  # 20 ms per call, over a 10 ms budget
    assert m.max_items_within(0.010, 64) == 64


@pytest.mark.parametrize(("code", "fragment"), [
    ("def m(self, xs: list[int], ctx: tensorwire.Context) -> list[int]: ...", "Context"),
    ("def m(self, x: int) -> list[int]: ...", "at least one list"),
    ("def m(self, xs: list[int]) -> int: ...", "return type"),
])
def test_definition_time_rules(code, fragment):
    ns: dict[str, t.Any] = {"tensorwire": tensorwire}
    exec(code, ns)
    with pytest.raises(TypeError, match=fragment):
        tensorwire.service(type("B", (), {"m": tensorwire.api(batchable=True)(ns["m"])}))


async def test_outputs_move_to_the_host_once_per_batch_then_split():
    model = Model(delay=0.02)
    transfers: list[int] = []

    async def to_host(value: t.Any) -> t.Any:
        transfers.append(len(value))  # the whole batch's output, not one request's
        return value

    b = Batcher(api(), model, to_host)
    results = await asyncio.gather(*(b.submit({"xs": [float(i)], "factor": 1.0})
                                     for i in range(12)))
    assert results == [[float(i)] for i in range(12)]
    assert transfers == list(b.stats.batch_sizes)
    assert len(transfers) < 12
    await b.close()
