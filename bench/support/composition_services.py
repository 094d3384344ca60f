"""The two-service graph of bench/composition.py: a pipeline that calls its model `n`
times per request on a float32 tensor of `size` elements it makes itself.

Written in the SDK BentoML and tensorwire share: bench/composition.py serves this file
with tensorwire as it is, and with BentoML 1.4 after renaming `tensorwire` to `bentoml`
(nothing else differs).
"""

import numpy as np

import tensorwire


@tensorwire.service
class Model:
    @tensorwire.api
    def echo(self, x: np.ndarray) -> np.ndarray:
        return x


@tensorwire.service
class Pipeline:
    model = tensorwire.depends(Model)

    @tensorwire.api
    def fan(self, size: int, n: int) -> list[int]:
        """`n` calls of the model, one after the other, on one tensor of `size` floats;
        the shape of the last answer (a request's own cost does not depend on `n`)."""
        x = np.ones((1, size), np.float32)
        y = x
        for _ in range(n):
            y = self.model.echo(x=x)
        return list(y.shape)
