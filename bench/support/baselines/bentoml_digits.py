"""BentoML 1.4 serving the digits CNN over HTTP, with its own adaptive batching.

Runs only in the BentoML venv that bench/real_model.py makes (never in the project's):

    BENTOML_DIGITS_BATCH=64 BENTOML_DIGITS_LATENCY_MS=60000 \\
        .venv-bentoml/bin/bentoml serve \\
            bench.support.baselines.bentoml_digits:DigitsBento --port 3000
    curl -s localhost:3000/classify -H 'Content-Type: application/json' -d @x.json

The same network, weights, device placement and preprocessing as `examples.digits`
(imported from `examples.digits_model`, which needs only torch and NumPy), written the
way BentoML's SDK asks: a batchable API takes the batch and returns one item per input
row, here a list of `{label, probabilities}`. BentoML cannot batch a model of tensors,
so this list is what a BentoML user would return; it carries the same numbers. The
batch is a NumPy array: BentoML batches `torch.Tensor` inputs only once its
`bentoml.pytorch` module is imported (else it hands the method a list of tensors),
and NumPy is its usual batch type.
The dispatcher's knobs come from the environment so the bench can give BentoML its
own defaults or tensorwire's.
"""

from __future__ import annotations

import os
import typing as t

import bentoml
import numpy as np
import torch
from bentoml.validators import DType, Shape
from pydantic import BaseModel

from examples.digits_model import WEIGHTS, load_model, predict

BATCH = int(os.environ.get("BENTOML_DIGITS_BATCH", "64"))
LATENCY_MS = int(os.environ.get("BENTOML_DIGITS_LATENCY_MS", "60000"))  # BentoML's default


class Prediction(BaseModel):
    label: int
    probabilities: list[float]


# One worker on one CPU, as tensorwire's single process: BentoML sets the worker's
# OMP/MKL thread counts from `resources`, not from the core it is pinned to.
@bentoml.service(workers=1, resources={"cpu": "1"}, traffic={"timeout": 60})
class DigitsBento:
    def __init__(self) -> None:
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = load_model(WEIGHTS, self.device)

    @bentoml.api(batchable=True, max_batch_size=BATCH, max_latency_ms=LATENCY_MS)
    def classify(
        self,
        x: t.Annotated[np.ndarray, Shape((-1, 1, 8, 8)), DType("float32")],
        /,
    ) -> list[Prediction]:
        """Root input: the body is the batch [N, 1, 8, 8]; one prediction per digit."""
        label, probabilities = predict(self.model, torch.from_numpy(x).to(self.device))
        labels, rows = label.cpu().tolist(), probabilities.cpu().tolist()
        return [Prediction(label=k, probabilities=p) for k, p in zip(labels, rows,
                                                                      strict=True)]
