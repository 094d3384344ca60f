"""The dispatcher holds for company when calls come faster than the model clears them.

Issue 37: the same load batched in one run (about 28 items a call) and trickled in the
next (1.3-1.7), depending on history. A dispatcher that starts whenever the model is
idle lets a steady stream of requests, each finding the model idle, run one or two at
a time. These scenarios run on a virtual clock (`virtual_time`), so the arrival times
are exact and the answers the same on a busy machine: a steady stream must batch, the
hold must end within the latency budget, as soon as the batch is full, or when the
stream stops, and a lone request or a light load must start at once.
"""

from __future__ import annotations

import asyncio
import statistics
import typing as t
from dataclasses import dataclass, field

import pytest

import tensorwire
from tensorwire.runtime.batching import SILENCE_GAPS, Arrivals, Batcher
from tests.unit.runtime.virtual_time import run_virtual

FIXED, PER_ITEM = 0.0005, 0.00001  # the model: 0.5 ms a call + 0.01 ms an item
BUDGET = 0.010


@tensorwire.service
class Stream:
    @tensorwire.api(batchable=True, max_batch_size=64, max_latency_ms=10)
    def wide(self, xs: list[float]) -> list[float]:
        return xs

    @tensorwire.api(batchable=True, max_batch_size=8, max_latency_ms=10)
    def narrow(self, xs: list[float]) -> list[float]:
        return xs


async def identity(value: t.Any) -> t.Any:
    return value


@dataclass
class Run:
    """What a scenario saw: each model call's start and size, each batch's waits."""

    batcher: Batcher
    starts: list[float] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    waits: list[list[float]] = field(default_factory=list)
    submitted: list[float] = field(default_factory=list)


def dispatcher(api: str = "wide", fixed: float = FIXED, per_item: float = PER_ITEM) -> Run:
    """A Batcher on the running (virtual) loop's clock, over a model that sleeps
    `fixed + per_item * n` seconds for n items."""
    loop = asyncio.get_running_loop()
    run: Run

    async def model(values: dict[str, t.Any]) -> list[float]:
        run.starts.append(loop.time())
        run.sizes.append(len(values["xs"]))
        await asyncio.sleep(fixed + per_item * len(values["xs"]))
        return [2 * x for x in values["xs"]]

    batcher = Batcher(tensorwire.get_service_spec(Stream).apis[api], model, identity,
                      observe=lambda n, waits, phases: run.waits.append(waits),
                      clock=loop.time)
    run = Run(batcher)
    return run


async def stream(run: Run, gap: float, count: int, first: int = 0) -> list[t.Any]:
    """`count` one-item requests, one every `gap` seconds; their answers."""
    loop = asyncio.get_running_loop()
    calls = []
    for i in range(first, first + count):
        run.submitted.append(loop.time())
        calls.append(asyncio.ensure_future(run.batcher.submit({"xs": [float(i)]})))
        await asyncio.sleep(gap)
    return await asyncio.gather(*calls)


def test_a_steady_stream_faster_than_the_model_forms_real_batches():
    async def scenario() -> Run:
        run = dispatcher()
        answers = await stream(run, 0.00025, 2000)  # 4 a ms; one at a time takes 0.51 ms
        assert answers == [[2.0 * i] for i in range(2000)]
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    # Starting whenever the model is idle gave 2.1 items a call here, for ever.
    assert statistics.mean(run.sizes) >= 8, statistics.mean(run.sizes)
    assert sum(run.sizes) == 2000


def test_holding_never_takes_a_request_past_its_latency_budget():
    async def scenario() -> Run:
        run = dispatcher()
        await stream(run, 0.00025, 2000)
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    held = list(run.batcher.stats.holds)
    assert sum(h > 0 for h in held) > len(held) / 2  # it did hold, most of the time
    for n, (size, waits) in enumerate(zip(run.sizes, run.waits, strict=True)):
        oldest = max(waits)
        assert oldest <= BUDGET + 1e-9
        if n < 2:
            continue  # the per-item cost is known from the second call's size on
        # with the other items' share of the call it joined: what batching added to it,
        # over the budget by at most the items that came while the last timer ran
        assert oldest + PER_ITEM * (size - 1) <= BUDGET + PER_ITEM * 8, (n, size, oldest)


def test_a_light_load_starts_every_request_at_once():
    async def scenario() -> Run:
        run = dispatcher()
        await stream(run, 0.020, 50)  # one request every 20 ms, a 0.5 ms model
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    assert run.sizes == [1] * 50
    assert set(run.batcher.stats.holds) == {0.0}
    assert max(w for waits in run.waits for w in waits) == 0.0


def test_a_lone_request_after_a_busy_spell_starts_at_once():
    async def scenario() -> Run:
        run = dispatcher()
        await stream(run, 0.00025, 400)  # the gaps' average is now 0.25 ms
        await asyncio.sleep(2.0)
        await stream(run, 0.0, 1, first=400)
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    assert run.sizes[-1] == 1
    assert run.batcher.stats.holds[-1] == 0.0
    assert run.waits[-1] == [0.0]


def test_the_hold_ends_as_soon_as_the_batch_is_full():
    async def scenario() -> Run:
        run = dispatcher("narrow")  # at most 8 items a call
        await stream(run, 0.00025, 400)
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    assert max(run.sizes) == 8
    assert statistics.mean(run.sizes) >= 6
    # 8 items come in 1.75 ms: no request waits for the 10 ms budget
    assert max(w for waits in run.waits for w in waits) < 0.003


def test_the_hold_ends_once_the_fixed_cost_is_amortised():
    async def scenario() -> Run:
        # 0.5 ms a call + 0.05 ms an item: past 2 * 0.5 / 0.05 = 20 items a batch, an
        # item's share of the fixed cost is under half its own; waiting longer for more
        # would mostly idle the core at the end of each burst
        run = dispatcher(fixed=0.0005, per_item=0.00005)
        await stream(run, 0.0001, 1000)
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    assert run.batcher.hold_target() == 20
    held = [size for size, hold in zip(run.sizes[2:], list(run.batcher.stats.holds)[2:],
                                       strict=True) if hold > 0]  # once a/b is known
    assert held and max(held) <= 21  # the target, or one more arriving in the same turn
    assert statistics.mean(run.sizes) >= 8
    # 20 items come in 2 ms: nobody waits for the 10 ms budget (a call runs 1.5 ms)
    assert max(w for waits in run.waits[2:] for w in waits) < BUDGET / 2


def test_the_hold_ends_when_the_stream_stops():
    async def scenario() -> Run:
        run = dispatcher()
        await stream(run, 0.00025, 401)
        await run.batcher.close()
        return run

    run = run_virtual(scenario())
    last_arrival = run.submitted[-1]
    # the last batch starts about SILENCE_GAPS gaps after the last request, not when
    # its oldest request's budget runs out
    assert run.starts[-1] - last_arrival <= (SILENCE_GAPS + 1) * 0.00025
    assert max(run.waits[-1]) < BUDGET


def test_the_arrival_gap_forgets_an_idle_hour_within_a_few_requests():
    arrivals = Arrivals(ceiling=2 * BUDGET)
    assert arrivals.expected_gap() is None  # one request says nothing about the next
    now = 0.0
    for _ in range(50):
        arrivals.arrived(now)
        now += 0.0001
    assert arrivals.expected_gap() == pytest.approx(0.0001)
    now += 3600.0  # an idle hour
    arrivals.arrived(now)
    assert arrivals.expected_gap() == 2 * BUDGET  # the latest gap, clipped: no company
    for _ in range(20):
        now += 0.0001
        arrivals.arrived(now)
    assert arrivals.expected_gap() < 0.002  # busy again after 20 requests, not 200
