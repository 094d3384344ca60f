"""examples/pipeline.py: the photo reader in front of the digits model, served in one
process (the model in-process) and as two (`tensorwire serve` twice, the reader with
`--dependency Digits=grpc://...`), on both protocols: each photo's answer is the one
the model gives offline for the reader's own pre-processing of it."""

from __future__ import annotations

import typing as t
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import tensorwire
from examples.digits_model import load_heldout, load_model, predict
from examples.pipeline import normalize, write_photos
from tests.support.servers import RunningServer, spawn_cli

pytestmark = pytest.mark.timeout(300)
COUNT = 24


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_photos(tmp_path_factory.mktemp("photos"), COUNT)


@pytest.fixture(scope="module")
def offline(photos: list[Path]) -> list[tuple[int, float]]:
    """(digit, confidence) of each photo, by the same weights in this process."""
    x = torch.from_numpy(np.stack([normalize(Image.open(p)) for p in photos]))
    labels, probabilities = predict(load_model(), x)
    return [(int(label), float(probabilities[i, label])) for i, label in enumerate(labels)]


@pytest.fixture(scope="module", params=["one process", "two processes"])
def reader(request: pytest.FixtureRequest) -> t.Iterator[RunningServer]:
    if request.param == "one process":
        server = spawn_cli("examples.pipeline:DigitReader")
        try:
            yield server
        finally:
            server.stop()
        return
    model = spawn_cli("examples.digits:Digits")
    try:
        server = spawn_cli("examples.pipeline:DigitReader", "--dependency",
                           f"Digits=grpc://{model.grpc_target}")
        try:
            yield server
        finally:
            server.stop()
    finally:
        model.stop()


def test_the_reader_reads_as_the_model_does(reader: RunningServer, photos: list[Path],
                                            offline: list[tuple[int, float]]) -> None:
    for url in (reader.http_url, f"grpc://{reader.grpc_target}"):
        with tensorwire.SyncClient(url) as client:
            one = [client.read(photo=p) for p in photos[:6]]
            many = client.read_all(photos=photos)
        for got, (digit, confidence) in zip([*one, *many], [*offline[:6], *offline],
                                            strict=True):
            assert got["digit"] == digit, url
            assert got["confidence"] == pytest.approx(confidence, abs=1e-5), url


def test_the_reader_reads_photos_right(offline: list[tuple[int, float]]) -> None:
    """The pre-processing is worth having: photos read as well as the clean digits."""
    _, truth = load_heldout()
    right = sum(digit == int(y) for (digit, _), y in zip(offline, truth[:COUNT], strict=True))
    assert right >= COUNT - 2, right
