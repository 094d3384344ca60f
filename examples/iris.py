"""An Iris-style classifier: a torch tensor in, a NumPy array of probabilities out.

    curl -s localhost:3000/classify -H 'Content-Type: application/json' \\
         -d '{"x": [[5.1, 3.5, 1.4, 0.2]]}'
    .venv/bin/python -c "import numpy as np; \\
         np.save('x.npy', np.array([[5.1, 3.5, 1.4, 0.2]], 'f4'))"
    curl -s localhost:3000/predict -H 'Content-Type: application/x-npy' \\
         -H 'Accept: application/x-npy' --data-binary @x.npy -o y.npy
"""

from __future__ import annotations

import typing as t

import numpy as np
import torch
from pydantic import Field

import tensorwire
from tensorwire.validators import DType, Shape

Features = t.Annotated[torch.Tensor, Shape((1, 4)), DType("float32")]

#: A fixed linear model (sepal length/width, petal length/width -> 3 species).
_WEIGHTS = [[0.4, 0.9, -1.2, -0.8], [0.3, -0.6, 0.2, -0.3], [-0.7, -0.5, 1.1, 1.4]]
_BIAS = [0.2, 1.0, -1.1]


@tensorwire.service
class Iris:
    """Classify iris flowers from four measurements."""

    SPECIES: t.ClassVar[list[str]] = ["setosa", "versicolor", "virginica"]

    def __init__(self) -> None:
        self.weights = torch.tensor(_WEIGHTS, dtype=torch.float32).T
        self.bias = torch.tensor(_BIAS, dtype=torch.float32)

    def _probabilities(self, x: torch.Tensor) -> np.ndarray:
        with torch.no_grad():
            return torch.softmax(x @ self.weights + self.bias, dim=-1).numpy()

    @tensorwire.api
    def classify(
        self,
        x: Features = Field(description="One row of four measurements (cm).",
                            examples=[[[5.1, 3.5, 1.4, 0.2]]]),
    ) -> np.ndarray:
        """Class probabilities, shape (1, 3)."""
        return self._probabilities(x)

    @tensorwire.api
    def predict(self, x: Features, /) -> np.ndarray:
        """Root input: the body is the tensor (JSON or .npy)."""
        return self._probabilities(x)

    @tensorwire.api
    def species(self, x: t.Annotated[torch.Tensor, Shape((-1, 4)), DType("float32")]
                ) -> list[str]:
        """The most likely species of each row."""
        return [self.SPECIES[i] for i in self._probabilities(x).argmax(axis=-1)]
