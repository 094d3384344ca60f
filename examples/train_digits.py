"""Train the digits CNN served by `examples/digits.py`, reproducibly, in seconds on a CPU.

    .venv/bin/python -m examples.train_digits                     # into $TMPDIR/tensorwire-digits
    .venv/bin/python -m examples.train_digits --out /tmp/d --epochs 15 --seed 0
    DIGITS_WEIGHTS=/tmp/d/digits_cnn.pt make serve SERVICE=examples.digits:Digits

A run writes into a scratch folder, never over the committed weights; to replace those
(a deliberate change, reviewed like code), say so: `--out examples/data`.

The data is scikit-learn's bundled 8x8 digits (`load_digits`: it ships inside the
package, nothing is downloaded; scikit-learn comes with the `examples` and `dev` extras,
the server never needs it). A stratified 80/20 split with a fixed seed keeps 360 digits
out of training; they are saved beside the weights (`digits_heldout.npz`) so the e2e
tests and benches ask the served model about digits it never saw.

Reproducible: one seed for the split, the initial weights and the shuffling, one CPU
thread and deterministic algorithms, so a run gives the same split and (on one machine
and torch version) the same weights. The committed weights came from the first command.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from examples.digits_model import SCRATCH, DigitsCNN, predict

WEIGHTS_NAME = "digits_cnn.pt"
HELDOUT_NAME = "digits_heldout.npz"


@dataclass
class Trained:
    """What a training run made and how well the weights do on the held-out split."""

    weights: Path
    heldout: Path
    accuracy: float
    seconds: float


def split(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_heldout, y_heldout): float32 [N, 1, 8, 8] in [0, 1], int64."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    x_train, x_held, y_train, y_held = train_test_split(
        x, y, test_size=0.2, stratify=y, random_state=seed)
    return x_train, y_train, x_held, y_held


def train(out: Path = SCRATCH, *, epochs: int = 15, seed: int = 0, batch_size: int = 32,
          lr: float = 2e-3) -> Trained:
    """Train on the 80 % split, save `state_dict` and held-out split into `out`."""
    start = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same sums in the same order on any machine
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        x_train, y_train, x_held, y_held = split(seed)
        torch.manual_seed(seed)
        model = DigitsCNN()
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        loss_fn = nn.CrossEntropyLoss()
        xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
        order = torch.Generator().manual_seed(seed)
        model.train()
        for _ in range(epochs):
            for idx in torch.randperm(len(xt), generator=order).split(batch_size):
                opt.zero_grad()
                loss_fn(model(xt[idx]), yt[idx]).backward()
                opt.step()
        model.eval()
        labels, _ = predict(model, torch.from_numpy(x_held))
        accuracy = float((labels.numpy() == y_held).mean())
        out.mkdir(parents=True, exist_ok=True)
        weights, heldout = out / WEIGHTS_NAME, out / HELDOUT_NAME
        torch.save(model.state_dict(), weights)
        np.savez_compressed(heldout, x=x_held, y=y_held)
    finally:
        torch.use_deterministic_algorithms(deterministic)
        torch.set_num_threads(threads)
    return Trained(weights, heldout, accuracy, time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=SCRATCH,
                   help=f"folder for weights and split (default {SCRATCH}; the committed "
                        "ones are in examples/data)")
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    done = train(a.out, epochs=a.epochs, seed=a.seed)
    print(f"held-out accuracy {done.accuracy:.4f} ({done.seconds:.1f} s); "
          f"wrote {done.weights} and {done.heldout}\n"
          f"serve them: DIGITS_WEIGHTS={done.weights} make serve SERVICE=examples.digits:Digits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
