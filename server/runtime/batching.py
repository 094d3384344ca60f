"""Adaptive micro-batching: concurrent requests to one API share one model call.

One dispatcher per API and worker. Requests are validated first (a bad one fails alone),
queued FIFO, and dispatched at once when the model is idle: a lone request never waits
for company, and while the model is busy requests accumulate, so batch size follows
load by itself. The batch cap adapts to the model: its service time is fitted online
as `t(n) = a + b·n`, and the cap is the largest `n <= max_batch_size` with
`b·(n - 1) <= max_latency_ms`, so sharing a call never costs a request more than
`max_latency_ms` over running alone (a cap on `t(n)` itself would collapse to 1 for the
models with a large fixed cost, the ones batching helps most); at a cap of one, every
`EXPLORE_AT_ONE`-th batch with others waiting may hold two items, so one slow batch (a
new shape's first call, a busy machine) cannot pin the cap at one for good. Overload is bounded by a
count (`--batch-queue-items`, default 32 x max_batch_size, then 503 / RESOURCE_EXHAUSTED
with Retry-After), not by predicted wait, which refused parts of short bursts an idle
model would have cleared. Oversized requests are split across batches and re-joined;
requests whose non-batched inputs differ are never merged. A batch's output moves to the
host once, must hold as many items as went in, and is split back (views where the
framework allows); a model error fails that batch's requests only, and a request
cancelled while queued never reaches the model.
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


@dataclass
class _Pending:
    values: dict[str, Any]
    key: tuple[Any, ...]
    items: int
    future: asyncio.Future[Any]
    arrival: float = field(default_factory=time.monotonic)
    #: What its trace needs (Tracing.enqueued), when tracing is on.
    trace: Any = None


@dataclass
class BatchStats:
    """What the dispatcher did recently (tests and metrics read it)."""

    batch_sizes: collections.deque[int] = field(
        default_factory=lambda: collections.deque(maxlen=1024))
    queue_waits: collections.deque[float] = field(
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
        observe: Callable[[int, list[float]], None] | None = None,
        tracing: Any = None,
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
        self._observe = observe
        #: tensorwire.telemetry.tracing.Tracing, or None when tracing is off.
        self.tracing = tracing
        self._queue: collections.deque[_Pending] = collections.deque()
        self._queued_items = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._at_one = 0  # batches taken at a cap of 1 with others waiting

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
        pending = _Pending(values, self._key(values), items, loop.create_future())
        if self.tracing is not None:
            pending.trace = self.tracing.enqueued()
        self._queue.append(pending)
        self._queued_items += items
        self._ensure_running()
        self._wake.set()
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
            batch = self._take()
            if batch:
                await self._run(batch)

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
        start = time.monotonic()
        started_ns = time.time_ns() if self.tracing is not None else 0
        failure: BaseException | None = None
        sizes = [p.items for p in batch]
        total = sum(sizes)
        inputs = dict(batch[0].values)
        try:
            for f in self.batch_fields:
                inputs[f.name] = f.codec.batch.concat([p.values[f.name] for p in batch],
                                                      self.in_dim)
            output = await self.to_host(await self.invoke(inputs))
            produced = self.out_batch.size(output, self.out_dim)
            if produced != total:
                raise InternalError(f"{self.api.name} returned {produced} items for a batch "
                                    f"of {total}")
            pieces = self.out_batch.split(output, sizes, self.out_dim)
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
            elapsed = time.monotonic() - start
            self.model.observe(total, elapsed)
            waits = [start - p.arrival for p in batch]
            self.stats.batch_sizes.append(total)
            self.stats.queue_waits.extend(waits)
            if self._observe is not None:
                self._observe(total, waits)
            if self.tracing is not None:
                ended_ns = time.time_ns()
                for p in batch:
                    if p.trace is not None:
                        self.tracing.batched(p.trace, started_ns, ended_ns, total, len(batch),
                                             failure)
