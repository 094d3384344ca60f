"""A numpy-only service for the start-up benchmark (`bench/startup.py`).

It imports numpy and builds its "model" in `__init__`, as a small real service would,
and takes an ndarray through the tensor codec: start-up pays for exactly what a numpy
service needs (no torch, tensorflow, pandas or PIL).
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

import tensorwire
from tensorwire.validators import DType, Shape


@tensorwire.service(name="NumpyIris", proto_package="numpy_iris")
class NumpyIris:
    def __init__(self) -> None:
        self.w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)

    @tensorwire.api
    def classify(self, x: Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]
                 ) -> np.ndarray:
        return x @ self.w
