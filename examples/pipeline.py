"""Two services, one pipeline: a photo pre-processor in front of the digits model.

`DigitReader` takes photos of handwritten digits as people take them (dark ink on
light paper, any size, the digit anywhere in the frame) and makes each what the
network was trained on (light on dark, cropped to the ink, square, 8x8); `Digits`
(`examples/digits.py`) classifies. The reader declares the model as its dependency,
`tensorwire.depends(Digits)`, and calls it as a method; where the model runs is the
deployment's choice, not the code's:

    # One process: the model runs in-process, its calls go through its request plan
    # (the tensor the reader made is handed to the model as it is: no bytes, no copy).
    tensorwire serve examples.pipeline:DigitReader

    # Two processes (two pods): the model on its own, the reader calling it over gRPC.
    tensorwire serve examples.digits:Digits --http-port 3001 --grpc-port 50052
    tensorwire serve examples.pipeline:DigitReader --dependency Digits=grpc://127.0.0.1:50052

    .venv/bin/python -m examples.pipeline /tmp/photos && cd /tmp/photos  # sample photos
    curl -s localhost:3000/read -F photo=@photo.png
    # {"digit":7,"confidence":...}
    curl -s localhost:3000/read_all -F photos=@a.png -F photos=@b.png
    # [{"digit":6,"confidence":...},{"digit":3,"confidence":...}]
    .venv/bin/python -c "import tensorwire, pathlib; print(tensorwire.SyncClient( \\
        'grpc://localhost:50051').read(photo=pathlib.Path('photo.png')))"
    # {'digit': 7, 'confidence': ...}

Either way the model's `classify` is `batchable=True`: the reader's calls share its
batches with every other caller's (other readers, direct clients of the model).
"""

from __future__ import annotations

import sys
import typing as t
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageOps
from pydantic import BaseModel, Field

import tensorwire
from examples.digits import Digits
from examples.digits_model import SCRATCH, load_heldout, preprocess, to_image
from tensorwire.validators import ContentType

Photo = t.Annotated[Image.Image, ContentType("image/*")]
#: Grey levels above this (on a 0-255 scale, light on dark) count as ink when cropping.
INK = 32


class Reading(BaseModel):
    """The digit read from one photo."""

    digit: int = Field(description="The most likely digit, 0-9.")
    confidence: float = Field(description="Its probability, 0-1.")


def normalize(photo: Image.Image) -> np.ndarray:
    """A photo as the network's input `[1, 8, 8]` float32 in [0, 1]: grey; light on dark
    (a light paper is inverted); cropped to the ink and centred in a square, as the
    training digits fill their frame; then the model's own 8x8 box filter."""
    grey = ImageOps.grayscale(photo)
    pixels = np.asarray(grey)
    if np.median(pixels) > 127:  # dark ink on light paper
        grey = ImageOps.invert(grey)
        pixels = np.asarray(grey)
    rows, cols = np.nonzero(pixels > INK)
    if len(rows):
        grey = grey.crop((int(cols.min()), int(rows.min()),
                          int(cols.max()) + 1, int(rows.max()) + 1))
        width, height = grey.size
        side = max(width, height)
        square = Image.new("L", (side, side), 0)
        square.paste(grey, ((side - width) // 2, (side - height) // 2))
        grey = square
    return preprocess(grey)


def readings(labels: torch.Tensor, probabilities: torch.Tensor) -> list[Reading]:
    return [Reading(digit=int(label), confidence=float(row[label]))
            for label, row in zip(labels.tolist(), probabilities, strict=True)]


@tensorwire.service
class DigitReader:
    """Reads handwritten digits from photos; the digits model does the classifying.

    curl -s localhost:3000/read -F photo=@photo.png
    """

    digits = tensorwire.depends(Digits)

    @tensorwire.api
    def read(self, photo: Photo) -> Reading:
        """The digit in one photo (a `def` API: the model is called as a method)."""
        x = torch.from_numpy(normalize(photo)[None])  # [1, 1, 8, 8]
        prediction = self.digits.classify(x)  # a root input: positional
        return readings(prediction.label, prediction.probabilities)[0]

    @tensorwire.api
    async def read_all(self, photos: list[Photo] = Field(min_length=1)) -> list[Reading]:
        """The digits of several photos, in one call of the model (an `async def` API:
        the model is awaited)."""
        batch = torch.from_numpy(np.stack([normalize(photo) for photo in photos]))
        prediction = await self.digits.to_async.classify(batch)
        return readings(prediction.label, prediction.probabilities)


def write_photos(folder: Path, count: int = 3) -> list[Path]:
    """Held-out digits as photos (dark ink on light paper, off-centre in a larger frame):
    photo.png, a.png, b.png... in `folder`."""
    x, _ = load_heldout()
    folder.mkdir(parents=True, exist_ok=True)
    names = ["photo", *(chr(ord("a") + i) for i in range(25))][:count]
    paths = []
    for name, digit in zip(names, x, strict=False):
        ink = ImageOps.invert(to_image(digit, 48))
        photo = Image.new("L", (120, 90), 230)
        photo.paste(ink.point(lambda v: min(v, 230)), (50, 20))
        path = folder / f"{name}.png"
        photo.save(path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write_photos(Path(sys.argv[1]) if len(sys.argv) > 1 else SCRATCH):
        print(written)
