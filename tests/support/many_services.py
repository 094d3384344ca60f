"""Services that share one server in tests/e2e/test_services.py and
tests/e2e/test_model_control.py: two with an API of one name (a clash a prefix
resolves) and a third with a batchable tensor API."""

from __future__ import annotations

import asyncio
import os
import typing as t

import numpy as np

import tensorwire
from tensorwire.validators import DType, Shape

Rows = t.Annotated[np.ndarray, Shape((-1, 2)), DType("float32")]


@tensorwire.service(proto_package="many.iris")
class Flowers:
    """Iris-like: predicts from four features."""

    @tensorwire.api
    def predict(self, x: t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]
                ) -> t.Annotated[np.ndarray, DType("float32")]:
        return x.sum(axis=1)

    @tensorwire.api
    def species(self) -> list[str]:
        return ["setosa", "versicolor", "virginica"]


@tensorwire.service(proto_package="many.wine")
class Wine:
    """A second model with an API named `predict` too."""

    def __init__(self) -> None:
        # Tests make loading fail on purpose (model control): the weights are missing.
        if os.environ.get("MANY_WINE_FAILS"):
            raise FileNotFoundError("wine.onnx: no such file (MANY_WINE_FAILS is set)")

    @tensorwire.api
    def predict(self, x: t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]
                ) -> t.Annotated[np.ndarray, DType("float32")]:
        return x.mean(axis=1)


#: RowSums instances made, and closed (model control's loads and unloads).
MADE: list[int] = []
CLOSED: list[int] = []


@tensorwire.service(proto_package="many.rows")
class RowSums:
    """A batchable tensor API, a text API and a slow one."""

    def __init__(self) -> None:
        MADE.append(id(self))
        self.generation = len(MADE)

    def close(self) -> None:
        CLOSED.append(id(self))

    @tensorwire.api
    async def generation_of(self) -> int:
        """Which instance answers (1 for the first made in this process)."""
        return self.generation

    @tensorwire.api
    async def wait(self, seconds: float) -> str:
        await asyncio.sleep(seconds)
        return f"waited {seconds}"

    @tensorwire.api(batchable=True, max_batch_size=8)
    def row_sums(self, rows: Rows) -> t.Annotated[np.ndarray, Shape((-1,)),
                                                  DType("float32")]:
        return rows.sum(axis=1)

    @tensorwire.api
    async def shout(self, text: str) -> str:
        return text.upper()


@tensorwire.service(name="Flowers", proto_package="many.iris")
class FlowersAgain:
    """Another class whose gRPC service has Flowers' full name (many.iris.Flowers)."""

    @tensorwire.api
    def petals(self, n: int) -> int:
        return n
