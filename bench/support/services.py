"""The tensorwire side of the benchmarks: `tensorwire serve bench.support.services:Bench`.

`predict` (async def, on the event loop) and `predict_sync` (def, in the thread pool)
are the two ways users write a unary API; `tokens` / `tokens_sync` stream `n` chunks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator
from typing import Annotated

from annotated_types import Ge, Le

import tensorwire
from bench.support.model import TOKEN, Feature, Prediction, classify

Count = Annotated[int, Ge(1), Le(1_000_000)]


@tensorwire.service(name="Bench", proto_package="bench")
class Bench:
    """Toy APIs whose cost is the serving stack itself."""

    @tensorwire.api
    async def predict(self, sepal_length: Feature, sepal_width: Feature,
                      petal_length: Feature, petal_width: Feature) -> Prediction:
        return classify(sepal_length, sepal_width, petal_length, petal_width)

    @tensorwire.api
    def predict_sync(self, sepal_length: Feature, sepal_width: Feature,
                     petal_length: Feature, petal_width: Feature) -> Prediction:
        return classify(sepal_length, sepal_width, petal_length, petal_width)

    @tensorwire.api
    async def tokens(self, n: Count = 16) -> AsyncGenerator[str, None]:
        for _ in range(n):
            yield TOKEN

    @tensorwire.api
    def tokens_sync(self, n: Count = 16) -> Generator[str, None, None]:
        for _ in range(n):
            yield TOKEN
