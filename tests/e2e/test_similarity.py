"""examples/similarity.py over both protocols: the neighbours NumPy finds by brute force,
for concurrent calls (the `def` API runs in the worker's thread pool)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tensorwire
from examples.similarity import DIM, Similarity, embedding_table
from tests.support.servers import serving, url_of


@pytest.fixture(scope="module")
def server():
    with serving(Similarity, threads=4) as running:
        yield running


def expected(queries: np.ndarray, k: int) -> list[list[int]]:
    table = embedding_table()
    scores = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ table.T
    return np.argsort(-scores, axis=1)[:, :k].tolist()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_nearest_rows_match_brute_force(server, protocol):
    rng = np.random.default_rng(7)
    batches = [rng.standard_normal((n, DIM), dtype=np.float32) for n in (1, 3, 8, 5)]
    with tensorwire.SyncClient(url_of(server, protocol)) as client, \
            ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda q: client.nearest(queries=q, k=4), batches))
    for queries, answer in zip(batches, answers, strict=True):
        assert answer["indices"] == expected(queries, 4)
        scores = np.array(answer["scores"])
        assert scores.shape == (len(queries), 4)
        assert np.all(np.diff(scores, axis=1) <= 0)  # best first
        assert np.all(np.abs(scores) <= 1.0 + 1e-5)  # cosine similarities


def test_bad_queries_are_refused(server):
    with tensorwire.SyncClient(url_of(server, "http")) as client:
        with pytest.raises(tensorwire.errors.InvalidArgument):
            client.nearest(queries=np.zeros((2, DIM + 1), np.float32))
        with pytest.raises(tensorwire.errors.InvalidArgument):
            client.nearest(queries=np.ones((1, DIM), np.float32), k=0)
