"""The digits example's model: retrained from scratch it is accurate, the committed
weights and held-out split are what the training script makes, and images are read as
the training data was made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from examples import train_digits
from examples.digits_model import (
    HELDOUT,
    WEIGHTS,
    load_heldout,
    load_model,
    predict,
    preprocess,
    to_image,
)
from examples.train_digits import train

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.timeout(600)  # a real training run on a shared 2-core machine


def accuracy(weights, heldout) -> float:
    x, y = load_heldout(heldout)
    labels, _ = predict(load_model(weights), torch.from_numpy(x))
    return float((labels.numpy() == y).mean())


def test_retraining_reaches_95_percent_on_the_committed_heldout_split(tmp_path):
    done = train(tmp_path)
    assert done.accuracy >= 0.95, done
    # measured again from the files, loaded as a server loads them (weights_only)
    assert accuracy(done.weights, done.heldout) == done.accuracy
    # the split is reproducible: the committed weights' held-out digits are these
    fresh, committed = load_heldout(done.heldout), load_heldout(HELDOUT)
    np.testing.assert_array_equal(fresh[0], committed[0])
    np.testing.assert_array_equal(fresh[1], committed[1])
    assert fresh[0].shape == (360, 1, 8, 8) and fresh[0].dtype == np.float32


def test_committed_weights_reach_95_percent_on_the_heldout_split():
    assert accuracy(WEIGHTS, HELDOUT) >= 0.95


def test_weights_load_as_tensors_only():
    state = torch.load(WEIGHTS, weights_only=True)
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    assert sum(v.numel() for v in state.values()) < 100_000  # small enough to commit


def test_an_image_of_a_digit_reads_back_as_its_cells():
    x, _ = load_heldout()
    image = to_image(x[7])
    assert image.size == (32, 32) and image.mode == "L"
    got = preprocess(image)
    assert got.shape == (1, 8, 8) and got.dtype == np.float32
    np.testing.assert_allclose(got, x[7], atol=0.5 / 255 + 1e-7)  # 8-bit rounding only


def test_any_size_and_mode_becomes_one_8x8_grey_digit():
    # a light bar over the left quarter of a 64x48 RGB picture
    pixels = np.zeros((48, 64, 3), np.uint8)
    pixels[:, :16] = 255
    got = preprocess(Image.fromarray(pixels))
    assert got.shape == (1, 8, 8)
    np.testing.assert_allclose(got[0, :, :2], 1.0, atol=1e-6)
    np.testing.assert_allclose(got[0, :, 2:], 0.0, atol=1e-6)


def test_the_sample_script_writes_outside_the_folder_it_runs_in(tmp_path):
    """`python -m examples.digits_model` used to write x.npy, x.json and digit.png into
    the current folder: the repository root, when pasted from the README."""
    scratch, cwd = tmp_path / "tmp", tmp_path / "repo"
    scratch.mkdir()
    cwd.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "examples.digits_model"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    assert list(cwd.iterdir()) == []
    written = sorted(p.name for p in (scratch / "tensorwire-digits").iterdir())
    assert written == ["digit.png", "x.json", "x.npy"], done.stdout


def test_retraining_by_default_leaves_the_committed_weights_alone(tmp_path, monkeypatch, capsys):
    before = WEIGHTS.read_bytes()
    assert not train_digits.SCRATCH.resolve().is_relative_to(ROOT)
    monkeypatch.setattr(train_digits, "SCRATCH", tmp_path)  # the default, made private
    assert train_digits.main(["--epochs", "1"]) == 0
    assert (tmp_path / "digits_cnn.pt").exists()
    assert WEIGHTS.read_bytes() == before
    assert f"DIGITS_WEIGHTS={tmp_path / 'digits_cnn.pt'}" in capsys.readouterr().out
