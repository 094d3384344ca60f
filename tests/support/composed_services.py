"""Services that call services (`tensorwire.depends`), for tests/unit/compose and
tests/e2e/test_composition.py: a `Model` with one API of each kind, and a `Pipeline`
that calls each of them from a `def` and an `async def` API.

`SEEN` records what the model received in this process (tests of the in-process path
check identities there); over the network, the APIs answer what they saw instead.
"""

from __future__ import annotations

import asyncio
import threading
import time
import typing as t
from pathlib import Path

import numpy as np
from pydantic import BaseModel

import tensorwire
from tensorwire.errors import ServiceUnavailable
from tensorwire.validators import DType, Shape

Rows = t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]

#: What the model got, by API, in this process (the in-process path's identities).
SEEN: dict[str, t.Any] = {}
#: Rows of each batch the batchable API ran, in this process.
BATCHES: list[list[float]] = []
#: Set when a slow call was cancelled (its `async def` saw CancelledError, or its
#: `def`'s Context turned cancelled).
CANCELLED = {"async": threading.Event(), "def": threading.Event()}


class Item(BaseModel):
    name: str
    weight: float = 1.0


@tensorwire.service(proto_package="composed.model")
class Model:
    """The dependency: tensors, models, files, streams, slowness and failure."""

    @tensorwire.api
    def classify(self, x: Rows) -> t.Annotated[np.ndarray, DType("float32")]:
        SEEN["classify"] = x
        return x.sum(axis=1)

    @tensorwire.api(batchable=True, max_batch_size=64, max_latency_ms=200)
    def batched(self, x: Rows) -> t.Annotated[np.ndarray, DType("float32")]:
        BATCHES.append([float(v) for v in x[:, 0]])
        time.sleep(0.05)  # calls that come meanwhile queue up for the next batch
        return x[:, 0] * 10

    @tensorwire.api
    async def weigh(self, item: Item) -> Item:
        SEEN["weigh"] = item
        return Item(name=item.name.upper(), weight=item.weight * 2)

    @tensorwire.api
    def stamp(self, document: Path, ctx: tensorwire.Context) -> Path:
        """A file in, a file out (written in the request's temp dir)."""
        SEEN["stamp"] = document
        out = ctx.temp_dir / "stamped.txt"
        out.write_bytes(b"stamped:" + document.read_bytes())
        return out

    @tensorwire.api
    async def spell(self, word: str) -> t.AsyncGenerator[str, None]:
        for letter in word:
            yield letter

    @tensorwire.api
    def count(self, n: int) -> t.Generator[int, None, None]:
        yield from range(n)

    @tensorwire.api
    async def wait(self, seconds: float) -> float:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            CANCELLED["async"].set()
            raise
        return seconds

    @tensorwire.api
    def wait_def(self, seconds: float, ctx: tensorwire.Context) -> float:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ctx.cancelled:
                CANCELLED["def"].set()
                return -1.0
            time.sleep(0.01)
        return seconds

    @tensorwire.api
    def seen(self, ctx: tensorwire.Context) -> dict[str, str]:
        """The request's id and trace headers, as this service received them."""
        headers = ctx.request.headers
        return {"request_id": ctx.request.id, "protocol": ctx.request.protocol,
                **{k: headers[k] for k in ("traceparent", "tracestate", "authorization")
                   if k in headers}}

    @tensorwire.api
    def fail(self, why: str) -> str:
        raise ValueError(why)

    @tensorwire.api
    async def total(self, frames: t.AsyncIterator[Rows]) -> float:
        """A streamed input: the sum of every frame."""
        out = 0.0
        async for frame in frames:
            SEEN.setdefault("total", []).append(frame)
            out += float(frame.sum())
        return out


@tensorwire.service(proto_package="composed.pipeline")
class Pipeline:
    """Calls `Model` from `def` and `async def` APIs."""

    model = tensorwire.depends(Model)

    def __init__(self) -> None:
        # A dependency is usable in __init__ already (a warm-up call); one that is down
        # must not keep the pipeline from starting.
        try:
            self.warm: float | None = float(
                self.model.classify(x=np.ones((1, 4), np.float32))[0])
        except ServiceUnavailable:
            self.warm = None

    @tensorwire.api
    def classify(self, x: Rows) -> t.Annotated[np.ndarray, DType("float32")]:
        SEEN["pipeline.classify"] = x
        return self.model.classify(x=x) * 2

    @tensorwire.api
    async def classify_async(self, x: Rows) -> t.Annotated[np.ndarray, DType("float32")]:
        SEEN["pipeline.classify_async"] = x
        return await self.model.to_async.classify(x=x) * 2

    @tensorwire.api
    def batched(self, x: Rows) -> t.Annotated[np.ndarray, DType("float32")]:
        return self.model.batched(x=x)

    @tensorwire.api
    async def weigh(self, item: Item) -> Item:
        SEEN["pipeline.weigh"] = item
        out = await self.model.weigh(item=item)
        assert isinstance(out, Item), type(out)  # typed: a model comes back as a model
        return out

    @tensorwire.api
    def stamp(self, document: Path) -> Path:
        out = self.model.stamp(document)
        assert isinstance(out, Path)
        return out

    @tensorwire.api
    async def spell(self, word: str) -> list[str]:
        return [letter async for letter in self.model.spell(word=word)]

    @tensorwire.api
    def count(self, n: int) -> list[int]:
        return list(self.model.count(n=n))

    @tensorwire.api
    def count_first(self, n: int) -> int:
        """Reads one chunk and leaves the stream."""
        with self.model.to_sync.count(n=n) as chunks:
            return next(iter(chunks))

    @tensorwire.api
    async def wait(self, seconds: float) -> float:
        return await self.model.to_async.wait(seconds=seconds)

    @tensorwire.api
    def wait_def(self, seconds: float) -> float:
        return self.model.to_sync.wait(seconds=seconds)

    @tensorwire.api
    def wait_in_thread(self, seconds: float) -> float:
        return self.model.wait_def(seconds=seconds)

    @tensorwire.api
    def seen(self) -> dict[str, str]:
        return self.model.seen()

    @tensorwire.api
    async def seen_async(self) -> dict[str, str]:
        return await self.model.to_async.seen()

    @tensorwire.api
    def seen_stream(self, n: int) -> t.Generator[dict[str, str], None, None]:
        """A `def` generator's chunks call the model: the request's frame is theirs."""
        for _ in range(n):
            yield self.model.seen()

    @tensorwire.api
    def wait_stream(self, seconds: float) -> t.Generator[float, None, None]:
        yield self.model.wait_def(seconds=seconds)

    @tensorwire.api
    async def seen_stream_async(self, n: int) -> t.AsyncGenerator[dict[str, str], None]:
        for _ in range(n):
            yield await self.model.to_async.seen()

    @tensorwire.api
    def fail(self, why: str) -> str:
        return self.model.fail(why=why)

    @tensorwire.api
    def total(self, frames: list[Rows]) -> float:
        """Streams its frames into the model (an iterable for a streamed input)."""
        SEEN["total"] = []
        return self.model.to_sync.total(frames=frames)

    @tensorwire.api
    def bad_input(self) -> np.ndarray:
        """Sends the model a mis-shaped tensor: the pipeline's bug."""
        return self.model.classify(x=np.ones((2, 3), np.float32))

    @tensorwire.api
    async def blocking_on_loop(self) -> str:
        """The mistake of a blocking call from async code, made on purpose."""
        return str(self.model.to_sync.classify(x=np.ones((1, 4), np.float32)))
