"""A trained CNN served for real: digit images or tensor batches in, labels and probabilities out.

    make serve SERVICE=examples.digits:Digits       # HTTP :3000, gRPC :50051
    .venv/bin/python -m examples.digits_model /tmp/digits && cd /tmp/digits  # x.npy, ...

    # a tensor batch [N, 1, 8, 8] float32: a .npy body or a JSON array
    curl -s localhost:3000/classify -H 'Content-Type: application/x-npy' --data-binary @x.npy
    curl -s localhost:3000/classify -H 'Content-Type: application/json' -d @x.json
    # images of any size and format: light digits on a dark ground, as the training data
    curl -s localhost:3000/classify_images -F images=@digit.png -F images=@digit.png

The network (`examples/digits_model.py`) was trained by `examples/train_digits.py` on
scikit-learn's 8x8 digits; its weights are committed, so serving needs no training run
(`DIGITS_WEIGHTS=path/to/digits_cnn.pt` serves a retrained set instead).
Both APIs are `batchable=True`: concurrent requests share one forward pass, on the GPU
when there is one, and the batch's outputs come back to the host in one transfer.
"""

from __future__ import annotations

import os
import typing as t
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from pydantic import Field

import tensorwire
from examples.digits_model import CLASSES, WEIGHTS, load_model, predict, preprocess
from tensorwire.validators import ContentType, DType, Shape

#: A batch of 8x8 grey digits scaled to [0, 1], the network's own input.
DigitBatch = t.Annotated[torch.Tensor, Shape((-1, 1, 8, 8)), DType("float32")]
DigitImage = t.Annotated[Image.Image, ContentType("image/*")]


class Prediction(tensorwire.IODescriptor):
    """One label and one probability row per digit sent, in the order sent."""

    label: t.Annotated[torch.Tensor, Shape((-1,)), DType("int64")] = Field(
        description="The most likely digit of each input, shape [N].")
    probabilities: t.Annotated[torch.Tensor, Shape((-1, CLASSES)), DType("float32")] = Field(
        description="Softmax over the digits 0-9 of each input, shape [N, 10].")


@tensorwire.service
class Digits:
    """Handwritten digit classifier (a small CNN trained on scikit-learn's 8x8 digits).

    curl -s localhost:3000/classify -H 'Content-Type: application/x-npy' --data-binary @x.npy
    """

    def __init__(self) -> None:
        # Loaded once per worker, onto the GPU when there is one; eval mode for inference
        # (inference mode itself is per thread: `predict` enters it where it computes).
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = load_model(Path(os.environ.get("DIGITS_WEIGHTS") or WEIGHTS), self.device)

    def _predict(self, x: torch.Tensor) -> Prediction:
        # Outputs stay on the device: the runtime moves the whole batch's tensors to the
        # host in one pinned, non-blocking transfer with one synchronisation.
        label, probabilities = predict(self.model, x.to(self.device, non_blocking=True))
        return Prediction(label=label, probabilities=probabilities)

    @tensorwire.api(batchable=True)
    def classify(
        self,
        x: DigitBatch = Field(description="Digits [N, 1, 8, 8], float32 in [0, 1]."),
        /,
    ) -> Prediction:
        """Classify a tensor batch: the body is the tensor (JSON nested lists or .npy).

            curl -s localhost:3000/classify -H 'Content-Type: application/x-npy' \\
                 --data-binary @x.npy
            curl -s localhost:3000/classify -H 'Content-Type: application/json' -d @x.json
            # {"label":[7,6,3,7],"probabilities":[[2.3e-09, ...], ...]}

        Over gRPC the request's `x` is a `tensorwire.v1.Tensor`.
        """
        return self._predict(x)

    @tensorwire.api(batchable=True)
    def classify_images(
        self,
        images: list[DigitImage] = Field(
            min_length=1, description="Digit images, any size and format PIL reads."),
    ) -> Prediction:
        """Classify images: each is made grey and box-filtered to 8x8, as the training data.

            curl -s localhost:3000/classify_images -F images=@digit.png
            # {"label":[7],"probabilities":[[2.3e-09, ...]]}

        Over HTTP the images are repeated multipart parts `images`; over gRPC a repeated
        `tensorwire.v1.File`.
        """
        batch = np.stack([preprocess(image) for image in images])
        return self._predict(torch.from_numpy(batch))
