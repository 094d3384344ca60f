"""A numpy-only service for the start-up benchmark (`bench/startup.py`).

It imports numpy and builds its "model" in `__init__`, as a small real service would.
The input is a flat `list[float]` (rows of 4) because this branch predates the ndarray
codec; with it, `x: Annotated[np.ndarray, Shape((-1, 4))]` costs no extra imports.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np
from annotated_types import MaxLen

import tensorwire


@tensorwire.service(name="NumpyIris", proto_package="numpy_iris")
class NumpyIris:
    def __init__(self) -> None:
        self.w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)

    @tensorwire.api
    def classify(self, x: Annotated[list[float], MaxLen(4 * 1024)]) -> list[float]:
        rows = np.asarray(x, dtype=np.float32).reshape(-1, 4)
        return (rows @ self.w).ravel().tolist()
