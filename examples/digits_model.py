"""The digits CNN, its weights and its preprocessing: shared by training, serving and benches.

This module imports only torch and NumPy (PIL lazily), never tensorwire: the BentoML
baseline of `bench/real_model.py` runs in a venv of its own and serves the very same
network, weights and preprocessing from here.

The data is scikit-learn's bundled 8x8 digits (`sklearn.datasets.load_digits`): each
image is a 32x32 white-on-black bitmap whose 4x4 blocks were counted into 0..16. The
network reads `count / 16`, a float32 in [0, 1], shaped `[N, 1, 8, 8]`.

    .venv/bin/python -m examples.digits_model [DIR]   # sample inputs for the curl examples

writes four held-out digits as `x.npy` and `x.json` and the first as `digit.png` into
DIR (default: `tensorwire-digits` in the system's temp folder, never the repository).
"""

from __future__ import annotations

import json
import sys
import tempfile
import typing as t
from pathlib import Path

import numpy as np
import torch
from torch import nn

if t.TYPE_CHECKING:
    from PIL import Image

DATA = Path(__file__).resolve().parent / "data"
#: The trained `state_dict` (committed, so serving needs no training run).
WEIGHTS = DATA / "digits_cnn.pt"
#: The held-out split the weights never saw: `x` float32 [N, 1, 8, 8] in [0, 1], `y` int64.
HELDOUT = DATA / "digits_heldout.npz"
CLASSES = 10
SIDE = 8
#: Where the sample inputs and a retraining go unless told: outside the repository.
SCRATCH = Path(tempfile.gettempdir()) / "tensorwire-digits"


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions, one 2x2 pooling, two dense layers: ~38k parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, CLASSES),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits `[N, 10]` of a batch `[N, 1, 8, 8]`."""
        return self.classifier(self.features(x))


def load_model(path: Path = WEIGHTS, device: torch.device | str = "cpu") -> DigitsCNN:
    """The trained network on `device`, in eval mode.

    `weights_only=True`: a weights file is read as tensors only, never unpickled code.
    """
    model = DigitsCNN()
    state = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval()


def predict(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(labels `[N]` int64, probabilities `[N, 10]` float32), left on the model's device.

    Runs under `torch.inference_mode()` (no autograd records, no version counters);
    inference mode is per thread, so it is entered here, in the thread that computes.
    """
    with torch.inference_mode():
        probabilities = torch.softmax(model(x), dim=1)
        return probabilities.argmax(dim=1), probabilities


def preprocess(image: Image.Image) -> np.ndarray:
    """An image of any size and mode as the training data was made: `[1, 8, 8]` float32.

    Grayscale, then each of the 8x8 cells is the mean of the pixels it covers (a box
    filter: exactly the training data's counting of 4x4 blocks of a 32x32 bitmap), scaled
    to [0, 1]. Digits are light on a dark ground, as in the training data.
    """
    from PIL import Image

    grey = image.convert("L").resize((SIDE, SIDE), Image.Resampling.BOX)
    return (np.asarray(grey, dtype=np.float32) / 255.0).reshape(1, SIDE, SIDE)


def to_image(x: np.ndarray, size: int = 32) -> Image.Image:
    """One held-out digit (`[1, 8, 8]` or `[8, 8]` in [0, 1]) as a `size`-pixel PNG-able image.

    Each cell becomes a square block of pixels, so `preprocess` reads back the cell's
    value rounded to 1/255.
    """
    from PIL import Image

    cells = np.clip(np.rint(np.asarray(x).reshape(SIDE, SIDE) * 255), 0, 255).astype(np.uint8)
    image = Image.fromarray(cells)  # uint8, 2-D: mode "L"
    return image.resize((size, size), Image.Resampling.NEAREST)


def load_heldout(path: Path = HELDOUT) -> tuple[np.ndarray, np.ndarray]:
    """(x float32 [N, 1, 8, 8], y int64 [N]) of the held-out split (no pickles read)."""
    with np.load(path, allow_pickle=False) as data:
        return data["x"], data["y"]


def write_samples(folder: Path, count: int = 4) -> list[Path]:
    """`count` held-out digits as x.npy and x.json, and the first as digit.png, in `folder`."""
    x, _ = load_heldout()
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / "x.npy", folder / "x.json", folder / "digit.png"]
    np.save(paths[0], x[:count])
    paths[1].write_text(json.dumps(x[:count].tolist()))
    to_image(x[0]).save(paths[2])
    return paths


if __name__ == "__main__":
    for written in write_samples(Path(sys.argv[1]) if len(sys.argv) > 1 else SCRATCH):
        print(written)
