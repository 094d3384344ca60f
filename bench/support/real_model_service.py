"""The digits CNN without batching: the 'tensorwire unbatched' side of bench/real_model.py.

    tensorwire serve bench.support.real_model_service:DigitsUnbatched

The same weights, input type, output model and device placement as
`examples.digits:Digits`; only `batchable=True` is missing, so every request runs its
own forward pass (in the `--threads` pool, several at a time).
"""

from __future__ import annotations

import torch
from pydantic import Field

import tensorwire
from examples.digits import DigitBatch, Prediction
from examples.digits_model import WEIGHTS, load_model, predict


@tensorwire.service
class DigitsUnbatched:
    """examples.digits:Digits.classify, one forward pass per request.

    curl -s localhost:3000/classify -H 'Content-Type: application/json' -d @x.json
    """

    def __init__(self) -> None:
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = load_model(WEIGHTS, self.device)

    @tensorwire.api
    def classify(
        self,
        x: DigitBatch = Field(description="Digits [N, 1, 8, 8], float32 in [0, 1]."),
        /,
    ) -> Prediction:
        """Classify a tensor batch, alone.

            curl -s localhost:3000/classify -H 'Content-Type: application/x-npy' \\
                 --data-binary @x.npy
        """
        label, probabilities = predict(self.model, x.to(self.device, non_blocking=True))
        return Prediction(label=label, probabilities=probabilities)
