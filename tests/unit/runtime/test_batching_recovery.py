"""The dispatcher's cap is not pinned at one by a single slow batch.

A real model's first call at a new input shape (or a collection pause, or a busy
machine) can take a hundred times its usual time. Fitted into `t(n) = a + b·n`, that
one batch makes the per-item cost look huge and the cap fall to one; at a cap of one
only batches of one were ever observed again, so nothing corrected the fit and a fast
model ran one item per call for hundreds of batches (the digits e2e test met exactly
this). Now every 8th batch taken at a cap of one may hold two items.
"""

from __future__ import annotations

import asyncio
import typing as t

import tensorwire
from tensorwire.runtime.batching import EXPLORE_AT_ONE, Batcher


@tensorwire.service
class Fast:
    @tensorwire.api(batchable=True, max_batch_size=8, max_latency_ms=10)
    def double(self, xs: list[float]) -> list[float]:
        return [2 * x for x in xs]


class Model:
    """1 ms + 0.05 ms per item, recording each batch's size."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def __call__(self, values: dict[str, t.Any]) -> list[float]:
        self.sizes.append(len(values["xs"]))
        await asyncio.sleep(0.001 + 0.00005 * len(values["xs"]))
        return [2 * x for x in values["xs"]]


async def identity(value: t.Any) -> t.Any:
    return value


def poisoned() -> tuple[Batcher, Model]:
    model = Model()
    b = Batcher(tensorwire.get_service_spec(Fast).apis["double"], model, identity)
    for _ in range(50):
        b.model.observe(1, 0.001)
    b.model.observe(8, 0.2)  # one batch 25x slower than it should be
    assert b.cap() == 1  # the fit now says 28 ms per item, over the 10 ms budget
    return b, model


async def test_a_cap_of_one_still_takes_two_items_now_and_then():
    b, model = poisoned()
    results = await asyncio.gather(*(b.submit({"xs": [float(i)]}) for i in range(64)))
    assert results == [[2.0 * i] for i in range(64)]
    assert 2 in model.sizes
    assert model.sizes[EXPLORE_AT_ONE - 1] == 2  # the 8th batch taken with others waiting
    await b.close()


async def test_the_cap_recovers_from_one_slow_batch():
    b, model = poisoned()
    for _ in range(6):  # waves of 64 concurrent single-item requests
        await asyncio.gather(*(b.submit({"xs": [float(i)]}) for i in range(64)))
        if b.cap() > 1:
            break
    assert b.cap() > 1, b.model.coefficients()
    await asyncio.gather(*(b.submit({"xs": [float(i)]}) for i in range(64)))
    assert max(model.sizes[-8:]) > 2  # batching again, beyond the exploring pairs
    await b.close()

