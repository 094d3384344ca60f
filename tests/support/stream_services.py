"""Services whose APIs take streamed inputs (`AsyncIterator[T]` / `Iterator[T]`).

Each cardinality (client streaming, bidirectional) with tensors, models, text and
files, `def` and `async def`, plus probes that record what the server saw: how many
elements a slow model had been handed, how many chunks a generator had made, which
calls ended how. `SEEN` is per process (the in-thread servers of the e2e tests share
it with the test).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import typing as t
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator
from pathlib import Path

import numpy as np
from annotated_types import Ge, Le
from pydantic import BaseModel

import tensorwire
from tensorwire.validators import DType, Shape

Frame = t.Annotated[np.ndarray, Shape((-1,)), DType("float32")]

#: tag -> what a call observed (elements taken, chunks made, how it ended, temp dirs).
SEEN: dict[str, dict[str, t.Any]] = {}
_LOCK = threading.Lock()


def seen(tag: str) -> dict[str, t.Any]:
    with _LOCK:
        return SEEN.setdefault(tag, {"taken": 0, "made": 0, "ended": None, "dirs": []})


class Reading(BaseModel):
    sensor: str
    value: t.Annotated[float, Ge(-100), Le(100)]


class Summary(BaseModel):
    count: int
    mean: float
    sensors: list[str]


@tensorwire.service(name="streams")
class Streams:
    """Streamed inputs of every kind."""

    @tensorwire.api
    async def total(self, frames: AsyncIterator[Frame]) -> float:
        """Client streaming, tensors: the sum of every sample."""
        out = 0.0
        async for frame in frames:
            out += float(frame.sum())
        return out

    @tensorwire.api
    async def running(self, frames: AsyncIterator[Frame]) -> AsyncGenerator[Frame, None]:
        """Bidirectional, tensors: the running sum, one chunk per frame."""
        acc: np.ndarray | None = None
        async for frame in frames:
            acc = frame.copy() if acc is None or acc.shape != frame.shape else acc + frame
            yield acc

    @tensorwire.api
    def average(self, readings: Iterator[Reading]) -> Summary:
        """Client streaming, models, a `def` in the thread pool."""
        values: list[float] = []
        sensors: list[str] = []
        for r in readings:
            values.append(r.value)
            if r.sensor not in sensors:
                sensors.append(r.sensor)
        return Summary(count=len(values), mean=sum(values) / len(values) if values else 0.0,
                       sensors=sensors)

    @tensorwire.api
    async def scaled(self, readings: AsyncIterator[Reading]) -> AsyncGenerator[Reading, None]:
        """Bidirectional, models."""
        async for r in readings:
            yield Reading(sensor=r.sensor.upper(), value=r.value / 2)

    @tensorwire.api
    def upper(self, words: Iterator[str], /) -> Generator[str, None, None]:
        """Bidirectional, a root `str` stream, a `def` generator."""
        for word in words:
            yield word.upper()

    @tensorwire.api
    async def sizes(self, files: AsyncIterator[Path], ctx: tensorwire.Context
                    ) -> AsyncGenerator[int, None]:
        """Bidirectional, files: each lands in the call's temp dir (recorded by tag)."""
        tag = ctx.request.headers.get("x-tag", "")
        seen(tag)["dirs"].append(str(ctx.temp_dir))
        async for path in files:
            yield path.stat().st_size

    @tensorwire.api
    async def slow_sum(self, frames: AsyncIterator[Frame], ctx: tensorwire.Context) -> float:
        """A slow consumer: 50 ms per element; records how many it was handed."""
        record = seen(ctx.request.headers.get("x-tag", ""))
        out = 0.0
        try:
            async for frame in frames:
                record["taken"] += 1
                out += float(frame.sum())
                await asyncio.sleep(0.05)
            record["ended"] = "done"
        except asyncio.CancelledError:
            record["ended"] = "cancelled"
            raise
        return out

    @tensorwire.api
    async def flood(self, counts: AsyncIterator[int], ctx: tensorwire.Context
                    ) -> AsyncGenerator[bytes, None]:
        """For a slow reader: each element asks for that many 256 KiB chunks; records
        how many were made (a chunk is made only when the last one was taken)."""
        record = seen(ctx.request.headers.get("x-tag", ""))
        block = bytes(256 * 1024)
        try:
            async for n in counts:
                for _ in range(n):
                    record["made"] += 1
                    yield block
            record["ended"] = "done"
        except (asyncio.CancelledError, GeneratorExit):
            record["ended"] = "cancelled"
            raise

    @tensorwire.api
    def blocking_sum(self, frames: Iterator[Frame], ctx: tensorwire.Context) -> float:
        """A `def` consumer the client cancels mid-stream: it must be woken and end."""
        record = seen(ctx.request.headers.get("x-tag", ""))
        out = 0.0
        try:
            for frame in frames:
                record["taken"] += 1
                out += float(frame.sum())
            record["ended"] = "done"
        except tensorwire.errors.Cancelled:
            record["ended"] = "cancelled"
            raise
        finally:
            record["finished_at"] = time.monotonic()
        return out

    @tensorwire.api
    async def first_two(self, words: AsyncIterator[str]) -> str:
        """Answers before the client is done sending: the rest is not read."""
        taken = []
        async for word in words:
            taken.append(word)
            if len(taken) == 2:
                break
        return " ".join(taken)

    @tensorwire.api
    async def fails_at(self, numbers: AsyncIterator[int]) -> AsyncGenerator[int, None]:
        """Raises (a server error) on a negative element, after echoing the others."""
        async for n in numbers:
            if n < 0:
                raise RuntimeError(f"secret detail {n}")
            yield n


def server_state(server: t.Any) -> dict[str, int]:
    """What an in-thread server holds now: calls in flight, time limits registered,
    tasks on its loop, open file descriptors of the process."""
    async def tasks() -> int:
        return len(asyncio.all_tasks())

    runtime = server.runtime
    return {
        "in_flight": runtime.admission.in_flight,
        "limits": runtime.deadlines.pending,
        "tasks": asyncio.run_coroutine_threadsafe(tasks(), server.loop).result(10),
        "fds": len(os.listdir("/proc/self/fd")),
    }


def settles(server: t.Any, before: dict[str, int], *, fds_slack: int = 8,
            seconds: float = 10.0) -> dict[str, int]:
    """Wait until the server is back where it was (`before`): nothing in flight, no
    limit or task left behind, about as many fds. Returns the last state seen."""
    deadline = time.monotonic() + seconds
    while True:
        now = server_state(server)
        if (now["in_flight"] == 0 and now["limits"] == 0 and now["tasks"] <= before["tasks"]
                and now["fds"] <= before["fds"] + fds_slack):
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"the server did not settle: {now} (before: {before})")
        time.sleep(0.05)


def gone(path: str, seconds: float = 5.0) -> bool:
    """Whether `path` (a call's temp dir) is removed within `seconds`."""
    deadline = time.monotonic() + seconds
    while os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def ended(tag: str, seconds: float = 5.0) -> str | None:
    """How the call tagged `tag` ended ("done", "cancelled"), waiting up to `seconds`."""
    deadline = time.monotonic() + seconds
    while seen(tag)["ended"] is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return seen(tag)["ended"]
