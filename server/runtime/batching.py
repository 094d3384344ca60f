"""Adaptive micro-batching: concurrent requests to one API share one model call.

One dispatcher per API and worker. Requests are validated first (a bad one fails alone)
and queued FIFO. While the model is busy requests accumulate, so batch size follows load
by itself; when the model is idle the dispatcher decides whether to start at once or to
hold the queue for company (`Batcher.hold_for`).

Starting at once whenever the model is idle was not enough: when a call costs the model
little against the transport (one core shared by the event loop and the model), arrivals
spread out, each found the model idle and ran with one or two others, and the server
settled in a trickle of tiny batches as slow as no batching, or in real batches,
depending on its history. So the dispatcher measures the gaps between arrivals (an EWMA,
and the latest gap) and holds only when calls come faster than the model clears them one
at a time (the expected gap is shorter than a one-item call), company is expected before
the budget runs out, and the stream has not paused (no silence of `SILENCE_GAPS`
expected gaps). It holds at most until its oldest request has waited `max_latency_ms`
less the other items' share of the call (`b·q`), and starts as soon as the queue holds a
batch worth running: the cap, or `AMORTISED`·a/b items, past which the fixed cost is
amortised and a longer hold would mostly idle the core at the end of a burst (requests
arriving meanwhile queue for the next call, as while the model is busy). A lone request
after a quiet spell, or any request under light load, starts at once.

The batch cap adapts to the model: its service time is fitted online as `t(n) = a + b·n`,
and the cap is the largest `n <= max_batch_size` with `b·(n - 1) <= max_latency_ms`, so
sharing a call never costs a request more than `max_latency_ms` over running alone (a
cap on `t(n)` itself would collapse to 1 for the models with a large fixed cost, the ones
batching helps most); at a cap of one, every `EXPLORE_AT_ONE`-th batch with others
waiting may hold two items, so one slow batch (a new shape's first call, a busy machine)
cannot pin the cap at one for good. Overload is bounded by a count
(`--batch-queue-items`, default 32 x max_batch_size, then 503 / RESOURCE_EXHAUSTED with
Retry-After), not by predicted wait, which refused parts of short bursts an idle model
would have cleared. Oversized requests are split across batches and re-joined; requests
whose non-batched inputs differ are never merged. A batch's output moves to the host
once, must hold as many items as went in, and is split back (views where the framework
allows); a model error fails that batch's requests only, and a request cancelled while
queued never reaches the model.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..contract.descriptor import APISpec
from ..errors import InternalError, InvalidArgument, Overloaded, TensorwireError, as_error
from ..wire.field_error import FieldError

#: At a cap of 1, every this-many-th batch (with others waiting) may hold two items.
EXPLORE_AT_ONE = 8
#: Weight of the newest arrival gap in the gap's moving average.
GAP_WEIGHT = 0.125
#: Holding stops once no request arrived for this many expected gaps: the stream paused.
SILENCE_GAPS = 3.0
#: Holding stops once the batch has this many times a/b items: each item's share of the
#: fixed cost is then at most half its own cost b (within 1.5x of the least an item can
#: cost), and a longer hold would mostly leave the core idle at the end of a burst.
AMORTISED = 2.0


class LatencyModel:
    """`t(n) = a + b·n`, fitted by exponentially weighted least squares."""

    def __init__(self, decay: float = 0.95) -> None:
        self.decay = decay
        self._s = [0.0] * 5  # weights, Σn, Σn², Σt, Σn·t
        self._sizes: set[int] = set()

    def observe(self, n: int, seconds: float) -> None:
        d = self.decay
        w, sn, snn, st, snt = (x * d for x in self._s)
        self._s = [w + 1, sn + n, snn + n * n, st + seconds, snt + n * seconds]
        if len(self._sizes) < 2:
            self._sizes.add(n)

    def coefficients(self) -> tuple[float, float] | None:
        """(a, b), or None before the fit is determined."""
        w, sn, snn, st, snt = self._s
        det = w * snn - sn * sn
        if len(self._sizes) < 2 or det <= 1e-12:
            return None
        b = (w * snt - sn * st) / det
        a = (st - b * sn) / w
        return max(a, 0.0), max(b, 0.0)

    def predict(self, n: int) -> float | None:
        coef = self.coefficients()
        return None if coef is None else coef[0] + coef[1] * n

    def max_items_within(self, budget: float, ceiling: int) -> int:
        """Largest n (<= ceiling) whose per-item time beyond one item fits `budget`."""
        coef = self.coefficients()
        if coef is None:
            return ceiling
        _, b = coef
        if b <= 0:
            return ceiling
        return max(1, min(ceiling, 1 + math.floor(budget / b + 1e-9)))


class Arrivals:
    """How fast requests come: an EWMA of the gaps between them, and the latest gap.

    A gap is clipped at `ceiling` (twice the latency budget): all the dispatcher asks
    is whether company comes within the budget, and an hour of idleness must not make
    the average forget, for hundreds of requests, that requests now come every 0.1 ms.
    """

    def __init__(self, ceiling: float) -> None:
        self.ceiling = ceiling
        self.last: float | None = None  # when the latest request arrived
        self.mean: float | None = None  # the gaps' moving average
        self.latest: float | None = None  # the latest gap

    def arrived(self, now: float) -> None:
        if self.last is not None:
            gap = min(max(now - self.last, 0.0), self.ceiling)
            self.latest = gap
            self.mean = gap if self.mean is None else self.mean + GAP_WEIGHT * (gap - self.mean)
        self.last = now

    def expected_gap(self) -> float | None:
        """The gap to expect before the next request: the average, or the latest gap
        when it was longer (a request after a quiet spell expects no company)."""
        if self.mean is None or self.latest is None:
            return None
        return max(self.mean, self.latest)


@dataclass
class _Pending:
    values: dict[str, Any]
    key: tuple[Any, ...]
    items: int
    future: asyncio.Future[Any]
    arrival: float
    #: What its trace needs (Tracing.enqueued), when tracing is on.
    trace: Any = None


@dataclass
class BatchStats:
    """What the dispatcher did recently (tests and metrics read it)."""

    batch_sizes: collections.deque[int] = field(
        default_factory=lambda: collections.deque(maxlen=1024))
    queue_waits: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=1024))
    #: Seconds the dispatcher held each batch for company (0: it started at once).
    holds: collections.deque[float] = field(
        default_factory=lambda: collections.deque(maxlen=1024))


class Batcher:
    """The dispatcher of one batchable API (see the module docstring)."""

    def __init__(
        self,
        api: APISpec,
        invoke: Callable[[dict[str, Any]], Awaitable[Any]],
        to_host: Callable[[Any], Awaitable[Any]],
        *,
        max_queue_items: int | None = None,
        observe: Callable[[int, list[float], tuple[float, float, float] | None], None]
        | None = None,
        tracing: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.invoke = invoke
        self.to_host = to_host
        self.in_dim, self.out_dim = api.batch_dim
        self.max_batch_size = api.max_batch_size
        self.max_latency = api.max_latency_ms / 1000.0
        self.max_queue_items = max_queue_items or 32 * api.max_batch_size
        self.batch_fields = [f for f in api.fields if f.codec.batch is not None]
        self.key_fields = [f for f in api.fields if f.codec.batch is None]
        self.out_batch = api.output.codec.batch
        self.model = LatencyModel()
        self.stats = BatchStats()
        #: Seconds, monotonic (tests pass their event loop's virtual clock).
        self.clock = clock
        self.arrivals = Arrivals(2 * self.max_latency)
        self._busy: float | None = None  # moving average of a batch's seconds, before a fit
        self._observe = observe
        #: tensorwire.telemetry.tracing.Tracing, or None when tracing is off.
        self.tracing = tracing
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queued_items = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._at_one = 0  # batches taken at a cap of 1 with others waiting
        self._hold_cap: int | None = None  # while holding: the items that end the hold
        self._held_since: float | None = None  # when holding the current head began

    # ------------------------------------------------------------------ intake
    async def submit(self, values: dict[str, Any]) -> Any:
        """The result of this request's items, computed within some batch."""
        counts: dict[str, int] = {}
        for f in self.batch_fields:
            try:
                counts[f.name] = f.codec.batch.size(values[f.name], self.in_dim)
            except FieldError as exc:  # e.g. a model input whose fields disagree in length
                raise InvalidArgument.at([f.name, *exc.loc], exc.msg, exc.type) from None
        if len(set(counts.values())) > 1:
            raise InvalidArgument(
                "batched inputs must hold the same number of items: "
                + ", ".join(f"{k}={v}" for k, v in counts.items()),
                detail=[{"loc": [k], "msg": f"{v} items", "type": "batch_mismatch"}
                        for k, v in counts.items()])
        items = next(iter(counts.values()))
        self.arrivals.arrived(self.clock())  # a request, however many chunks it becomes
        cap = self.cap()
        if items > cap:
            return await self._submit_split(values, items, cap)
        return await self._enqueue(values, items)

    async def _submit_split(self, values: dict[str, Any], items: int, cap: int) -> Any:
        sizes = [cap] * (items // cap) + ([items % cap] if items % cap else [])
        chunks = {f.name: f.codec.batch.split(values[f.name], sizes, self.in_dim)
                  for f in self.batch_fields}
        parts = []
        for i, size in enumerate(sizes):
            chunk = dict(values)
            for name, pieces in chunks.items():
                chunk[name] = pieces[i]
            parts.append(self._enqueue(chunk, size))
        results = await asyncio.gather(*parts)
        return self.out_batch.concat(list(results), self.out_dim)

    async def _enqueue(self, values: dict[str, Any], items: int) -> Any:
        if self._queued_items + items > self.max_queue_items:
            raise Overloaded(f"{self.api.name}: the batch queue is full ("
                             f"{self.max_queue_items} items); retry later",
                             headers={"Retry-After": "1"})
        loop = asyncio.get_running_loop()
        pending = _Pending(values, self._key(values), items, loop.create_future(),
                           self.clock())
        if self.tracing is not None:
            pending.trace = self.tracing.enqueued()
        self._queue.append(pending)
        self._queued_items += items
        self._ensure_running()
        if self._hold_cap is None or self._queued_items >= self._hold_cap:
            self._wake.set()  # a holding dispatcher wakes for a full batch, or its timer
        try:
            return await pending.future
        except asyncio.CancelledError:
            pending.future.cancel()  # leaves the queue when the next batch forms
            raise

    def _key(self, values: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(repr(values.get(f.name)) for f in self.key_fields)

    def cap(self) -> int:
        """Largest batch that adds at most max_latency_ms to any of its requests."""
        return self.model.max_items_within(self.max_latency, self.max_batch_size)

    def one_item_seconds(self) -> float | None:
        """What the model takes for one item: the fit, or before it a batch's average."""
        return self.model.predict(1) if self.model.coefficients() is not None else self._busy

    def hold_target(self) -> int:
        """The items a hold waits for: the cap, or fewer once the fixed cost is
        amortised (`AMORTISED`·a/b items; none when the model has no fixed cost)."""
        cap = self.cap()
        coef = self.model.coefficients()
        if coef is None or coef[1] <= 0:
            return cap
        fixed, per_item = coef
        return min(cap, math.ceil(AMORTISED * fixed / per_item))

    def hold_for(self, now: float) -> float:
        """Seconds to hold the queue for company before the next batch (0: start now).

        Asked when the model is idle and requests wait. Holding pays only when more
        requests come before the batch must start, and when they come faster than the
        model clears them one at a time (otherwise the model keeps up and every wait
        is lost); it stops once the queue holds `hold_target()` items, the stream
        pauses, or the oldest request's budget runs out. The answer is when to ask
        again: reaching the target wakes the dispatcher at once.
        """
        head = next((p for p in self._queue if not p.future.done()), None)
        if head is None:
            return 0.0
        queued = self._queued_items
        if queued >= self.hold_target():
            return 0.0
        gap = self.arrivals.expected_gap()
        one = self.one_item_seconds()
        if gap is None or one is None or gap >= one:
            return 0.0  # a lone request, or the model clears calls as fast as they come
        coef = self.model.coefficients()
        per_item = coef[1] if coef is not None else 0.0
        # the oldest request's budget, less the others' share of the call it will join
        left = head.arrival + self.max_latency - per_item * queued - now
        if gap > left:
            return 0.0  # no company expected before the batch must start
        last = self.arrivals.last if self.arrivals.last is not None else now
        pause_at = last + SILENCE_GAPS * gap
        if now >= pause_at:
            return 0.0  # the stream paused: what is queued is all that comes soon
        return min(left, pause_at - now)

    # ------------------------------------------------------------------ dispatch
    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            # A context of its own: the dispatcher serves every request, so it must not
            # inherit the one (and the trace) of the request that happened to start it.
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), context=contextvars.Context())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        for p in self._queue:
            if not p.future.done():
                p.future.set_exception(InternalError("the service is shutting down"))
        self._queue.clear()

    async def _loop(self) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            now = self.clock()
            hold = self.hold_for(now)
            if hold > 0:
                if self._held_since is None:
                    self._held_since = now
                await self._hold(hold)
                continue
            held = 0.0 if self._held_since is None else now - self._held_since
            self._held_since = None
            batch = self._take()
            if batch:
                self.stats.holds.append(held)
                await self._run(batch)

    async def _hold(self, seconds: float) -> None:
        """Wait `seconds`, or less if the queue reaches the hold's target first."""
        self._hold_cap = self.hold_target()
        self._wake.clear()
        timer = asyncio.get_running_loop().call_later(seconds, self._wake.set)
        try:
            await self._wake.wait()
        finally:
            timer.cancel()
            self._hold_cap = None

    def _take(self) -> list[_Pending]:
        """The next batch: FIFO among requests sharing the oldest one's key, up to the cap."""
        cap = self.cap()
        if cap == 1 and self.max_batch_size > 1 and len(self._queue) > 1:
            self._at_one += 1
            if self._at_one % EXPLORE_AT_ONE == 0:
                cap = 2
        taken: list[_Pending] = []
        total = 0
        key = None
        blocked = False  # FIFO within a key: stop at the first request that does not fit
        rest: collections.deque[_Pending] = collections.deque()
        for p in self._queue:
            if p.future.done():  # cancelled while queued: it leaves without running
                self._queued_items -= p.items
                continue
            if key is None:
                key = p.key
            if blocked or p.key != key or (taken and total + p.items > cap):
                blocked = blocked or p.key == key
                rest.append(p)
                continue
            taken.append(p)
            total += p.items
            self._queued_items -= p.items
        self._queue = rest
        return taken

    async def _run(self, batch: list[_Pending]) -> None:
        start = self.clock()
        started_ns = time.time_ns() if self.tracing is not None else 0
        failure: BaseException | None = None
        sizes = [p.items for p in batch]
        total = sum(sizes)
        inputs = dict(batch[0].values)
        phases: tuple[float, float, float] | None = None  # input, infer, output seconds
        try:
            for f in self.batch_fields:
                inputs[f.name] = f.codec.batch.concat([p.values[f.name] for p in batch],
                                                      self.in_dim)
            joined = self.clock()
            result = await self.invoke(inputs)
            inferred = self.clock()
            output = await self.to_host(result)
            produced = self.out_batch.size(output, self.out_dim)
            if produced != total:
                raise InternalError(f"{self.api.name} returned {produced} items for a batch "
                                    f"of {total}")
            pieces = self.out_batch.split(output, sizes, self.out_dim)
            phases = (joined - start, inferred - joined, self.clock() - inferred)
        except Exception as exc:
            failure = exc
            err = as_error(exc)
            if not isinstance(exc, TensorwireError):
                logging.getLogger("tensorwire.batching").error(
                    "%s: batch of %d failed", self.api.name, total, exc_info=exc)
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(err)
        else:
            for p, piece in zip(batch, pieces, strict=True):
                if not p.future.done():
                    p.future.set_result(piece)
        finally:
            elapsed = self.clock() - start
            self.model.observe(total, elapsed)
            self._busy = elapsed if self._busy is None else self._busy + 0.25 * (
                elapsed - self._busy)
            waits = [start - p.arrival for p in batch]
            self.stats.batch_sizes.append(total)
            self.stats.queue_waits.extend(waits)
            if self._observe is not None:
                self._observe(total, waits, phases)
            if self.tracing is not None:
                ended_ns = time.time_ns()
                for p in batch:
                    if p.trace is not None:
                        self.tracing.batched(p.trace, started_ns, ended_ns, total, len(batch),
                                             failure)
