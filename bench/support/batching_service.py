"""The batching benchmark's model: 2 ms fixed + 0.02 ms per item, on one "device".

The device runs one call at a time (a lock), as a GPU or a single BLAS-saturated core
would; so unbatched requests queue for it one by one while batched ones share a call.
"""

from __future__ import annotations

import threading
import time
import typing as t

import numpy as np

import tensorwire
from tensorwire.validators import DType, Shape

FIXED_S = 0.002
PER_ITEM_S = 0.00002
Rows = t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]
W = np.ones((4, 3), dtype=np.float32)


@tensorwire.service
class BatchModel:
    def __init__(self) -> None:
        self.device = threading.Lock()

    def _run(self, x: np.ndarray) -> np.ndarray:
        with self.device:
            time.sleep(FIXED_S + PER_ITEM_S * len(x))
            return x @ W

    @tensorwire.api
    def predict(self, x: Rows) -> np.ndarray:
        return self._run(x)

    @tensorwire.api(batchable=True, max_batch_size=64, max_latency_ms=10)
    def predict_batched(self, x: Rows) -> np.ndarray:
        return self._run(x)
