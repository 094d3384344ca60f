"""The trained digits example through both clients and protocols.

Every call must give the same Python result over HTTP and gRPC, from the sync and the
async client: a dict of a label array and a probability array equal (to 1e-6) to what
the same weights answer offline.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.support.client_calls import call_client
from tests.support.servers import url_of

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")
digits = pytest.importorskip("examples.digits")
model = pytest.importorskip("examples.digits_model")

X, _ = model.load_heldout()
IMAGES = [model.to_image(X[i]) for i in range(3)]


def norm(value: Any) -> Any:
    """Labels as (dtype, list), probabilities rounded to 1e-6 (what offline must match)."""
    return {"label": (str(value["label"].dtype), value["label"].tolist()),
            "probabilities": (str(value["probabilities"].dtype), value["probabilities"].shape,
                              np.round(value["probabilities"].astype("f8"), 6).tolist())}


def offline(batch: np.ndarray) -> dict[str, Any]:
    labels, probabilities = model.predict(model.load_model(), torch.from_numpy(batch))
    return norm({"label": labels.numpy(), "probabilities": probabilities.numpy()})


FROM_IMAGES = np.stack([model.preprocess(im) for im in IMAGES])
CALLS = [
    ("classify-numpy", digits.Digits, "classify", (X[:3],), {}, offline(X[:3])),
    ("classify-torch", digits.Digits, "classify", (torch.from_numpy(X[3:5]),), {},
     offline(X[3:5])),
    ("classify-images", digits.Digits, "classify_images", (), {"images": IMAGES},
     offline(FROM_IMAGES)),
]


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("id_", "service", "api", "args", "kwargs", "expect"), CALLS,
                         ids=[c[0] for c in CALLS])
def test_digits_answer_the_same(servers, id_, service, api, args, kwargs, expect, protocol,
                                client_kind):
    url = url_of(servers[service], protocol)
    got = call_client(url, client_kind, api, args, kwargs, norm)
    assert got["label"] == expect["label"]
    assert got["probabilities"][:2] == expect["probabilities"][:2]
    np.testing.assert_allclose(got["probabilities"][2], expect["probabilities"][2],
                               rtol=0, atol=1e-6)
