"""Services for the Open Inference Protocol e2e tests."""

from __future__ import annotations

import asyncio
import threading
import typing as t

import numpy as np
import torch

import tensorwire
from tensorwire.validators import DType, Shape

#: Every batch `score` ran: the first column of each row (callers tag their rows).
BATCHES: list[list[float]] = []
#: Cleared while a test holds `score` busy, so that requests queue up behind it.
GATE = threading.Event()
GATE.set()


@tensorwire.service
class Tensors:
    """Tensors of any dtype and size, bfloat16, a slow API and a batchable one."""

    @tensorwire.api
    def echo(self, x: np.ndarray) -> np.ndarray:
        """Any dtype and shape back as it came."""
        return x

    @tensorwire.api
    def halve(self, x: t.Annotated[torch.Tensor, Shape((-1,)), DType("bfloat16")]
              ) -> torch.Tensor:
        """bfloat16 in and out (raw bytes only on the protocol)."""
        return x / 2

    @tensorwire.api
    async def slow(self, seconds: float = 0.0) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @tensorwire.api(batchable=True, max_batch_size=64, max_latency_ms=500)
    def score(self, rows: t.Annotated[np.ndarray, Shape((-1, 2)), DType("float32")]
              ) -> np.ndarray:
        GATE.wait(10)
        BATCHES.append(rows[:, 0].tolist())
        return rows.sum(axis=1)
