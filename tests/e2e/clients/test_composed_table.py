"""The composed examples through both clients and protocols: a pipeline whose dependency
runs in the same server (examples/pipeline.py, examples/bentoml_distributed.py).

Every call must give the same Python result over HTTP and gRPC, from the sync and the
async client, and that result is what the dependency's own model answers offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from examples.bentoml_distributed import CENTROIDS, IrisClassifier, NearestCentroid, Preprocessing
from tests.support.client_calls import call_client, typed
from tests.support.servers import url_of

KINDS = [(kind, protocol) for kind in ("sync", "async") for protocol in ("http", "grpc")]
ROWS = np.array([[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 2.8, 4.3, 1.3]])


def plain(value: Any) -> Any:
    """An answer as plain Python: arrays as (dtype kind, list), models as dicts."""
    if isinstance(value, np.ndarray):
        return (value.dtype.kind, value.tolist())
    if isinstance(value, list):
        return [plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return typed(value.model_dump())
    return typed(value)


@pytest.mark.parametrize(("kind", "protocol"), KINDS)
def test_the_bentoml_example_answers_its_model_s_classes(servers, kind, protocol):
    url = url_of(servers[IrisClassifier], protocol)
    expected = NearestCentroid(CENTROIDS).predict(ROWS).tolist()
    got = call_client(url, kind, "classify", (), {"input_series": ROWS}, plain)
    assert got[1] == expected == [0, 2, 1]


@pytest.mark.parametrize(("kind", "protocol"), KINDS)
def test_the_bentoml_example_s_dependency_answers_on_its_own(servers, kind, protocol):
    url = url_of(servers[Preprocessing], protocol)
    got = call_client(url, kind, "preprocess", (), {"input_series": ROWS}, plain)
    assert got == ("f", ROWS.tolist())


torch = pytest.importorskip("torch")
pipeline = pytest.importorskip("examples.pipeline")
model = pytest.importorskip("examples.digits_model")


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return pipeline.write_photos(tmp_path_factory.mktemp("photos"), 3)


def offline(paths: list[Path]) -> list[dict[str, Any]]:
    """What the digits model reads from the same pre-processing, called in-process."""
    from PIL import Image

    batch = torch.from_numpy(np.stack([pipeline.normalize(Image.open(p)) for p in paths]))
    labels, probabilities = model.predict(model.load_model(), batch)
    return [typed({"digit": int(label), "confidence": round(float(row[label]), 5)})
            for label, row in zip(labels.tolist(), probabilities, strict=True)]


def rounded(value: Any) -> Any:
    """Readings (dicts, as a client without the model class reads them), rounded."""
    readings = value if isinstance(value, list) else [value]
    return [typed({"digit": r["digit"], "confidence": round(r["confidence"], 5)})
            for r in readings]


@pytest.mark.parametrize(("kind", "protocol"), KINDS)
def test_the_pipeline_reads_a_photo_through_its_dependency(servers, photos, kind, protocol):
    url = url_of(servers[pipeline.DigitReader], protocol)
    got = call_client(url, kind, "read", (), {"photo": photos[0]}, rounded)
    assert got == offline(photos[:1])


@pytest.mark.parametrize(("kind", "protocol"), KINDS)
def test_the_pipeline_reads_several_photos_in_one_model_call(servers, photos, kind,
                                                            protocol):
    url = url_of(servers[pipeline.DigitReader], protocol)
    got = call_client(url, kind, "read_all", (), {"photos": photos}, rounded)
    assert got == offline(photos)


#: What this table calls, for test_table's coverage check.
CALLS = [("classify", IrisClassifier, "classify"), ("preprocess", Preprocessing, "preprocess"),
         ("read", pipeline.DigitReader, "read"), ("read_all", pipeline.DigitReader, "read_all")]
