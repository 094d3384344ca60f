"""BentoML 1.4 serving the digits CNN over gRPC: its legacy Service + Runner API.

BentoML 1.4's own SDK (`@bentoml.service`, used by bentoml_digits.py) serves HTTP only;
`bentoml serve-grpc` refuses it ("type doesn't support gRPC serving"). gRPC is left to
the 1.x API kept under `bentoml.legacy`: a Runner with a batchable method (BentoML's
adaptive batching, in the runner's own process) behind an API server speaking
`bentoml.grpc.v1.BentoService/Call`. Runs only in the BentoML venv of
bench/real_model.py:

    BENTOML_CONFIG_OPTIONS="runners.digits.resources.cpu=1" \\
        .venv-bentoml/bin/bentoml serve-grpc bench.support.baselines.bentoml_digits_grpc:svc \\
        --port 50051 --api-workers 1

(`resources.cpu=1`: BentoML sets the runner's OMP/MKL thread counts from the machine's
CPU count, not from the core it is pinned to.)

The same network, weights and device placement as `examples.digits`; the answer is a
Multipart of the label and probability arrays, the numbers tensorwire sends.
"""

from __future__ import annotations

import os

import bentoml
import numpy as np
import torch
from bentoml.io import Multipart, NumpyNdarray

from examples.digits_model import WEIGHTS, load_model, predict

BATCH = int(os.environ.get("BENTOML_DIGITS_BATCH", "64"))
LATENCY_MS = int(os.environ.get("BENTOML_DIGITS_LATENCY_MS", "60000"))  # BentoML's default


class DigitsRunnable(bentoml.legacy.Runnable):
    SUPPORTED_RESOURCES = ("nvidia.com/gpu", "cpu")
    SUPPORTS_CPU_MULTI_THREADING = True

    def __init__(self) -> None:
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = load_model(WEIGHTS, self.device)

    @bentoml.legacy.Runnable.method(batchable=True, batch_dim=0)
    def classify(self, x: np.ndarray) -> np.ndarray:
        _, probabilities = predict(self.model, torch.from_numpy(x).to(self.device))
        return probabilities.cpu().numpy()


runner = bentoml.legacy.Runner(DigitsRunnable, name="digits", max_batch_size=BATCH,
                               max_latency_ms=LATENCY_MS)
svc = bentoml.legacy.Service("digits_grpc", runners=[runner])


@svc.api(input=NumpyNdarray(dtype="float32", shape=(-1, 1, 8, 8), enforce_dtype=True,
                            enforce_shape=True),
         output=Multipart(label=NumpyNdarray(), probabilities=NumpyNdarray()))
async def classify(x: np.ndarray) -> dict[str, np.ndarray]:
    """A batch [N, 1, 8, 8] float32 in; label [N] and probabilities [N, 10] out."""
    probabilities = await runner.classify.async_run(x)
    return {"label": probabilities.argmax(axis=1), "probabilities": probabilities}
