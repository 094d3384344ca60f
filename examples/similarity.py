"""Nearest neighbours in a fixed embedding table: a NumPy-heavy `def` API.

    tensorwire serve examples.similarity:Similarity --threads 4
    curl -s localhost:3000/nearest -H 'Content-Type: application/json' \\
         -d "{\\"queries\\": [[$(seq -s, 1 128)]], \\"k\\": 3}"   # one query of 128 numbers

The work is one matrix product (BLAS) and a partial sort per request, and NumPy releases
the GIL for both: `def` APIs run in the worker's thread pool (`--threads`), so one
worker keeps several cores busy with concurrent requests (bench/workers.py measures it).
BLAS may also split one product over its own threads; when the threads of the pool do
the parallel work, pin BLAS to one thread per call (`OPENBLAS_NUM_THREADS=1`,
`OMP_NUM_THREADS=1`) so the two do not oversubscribe the cores.
"""

from __future__ import annotations

import typing as t

import numpy as np
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.validators import DType, Shape

ROWS, DIM = 20_000, 128

Queries = t.Annotated[np.ndarray, Shape((-1, DIM)), DType("float32")]


class Neighbours(BaseModel):
    """The k best rows of the table for each query, best first (scores to 6 decimals)."""

    indices: list[list[int]]
    scores: list[list[float]]


def embedding_table(rows: int = ROWS, dim: int = DIM, seed: int = 0) -> np.ndarray:
    """A fixed table of unit-length rows (a stand-in for learned embeddings)."""
    table = np.random.default_rng(seed).standard_normal((rows, dim), dtype=np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    return table


@tensorwire.service
class Similarity:
    """Cosine-similarity search over a table of embeddings."""

    def __init__(self) -> None:
        self.table = embedding_table()

    @tensorwire.api
    def nearest(
        self,
        queries: Queries = Field(description=f"rows of {DIM} numbers (any length: they "
                                 "are normalised)"),
        k: t.Annotated[int, Field(ge=1, le=100)] = 5,
    ) -> Neighbours:
        """The `k` most similar table rows of each query (cosine similarity)."""
        norms = np.linalg.norm(queries, axis=1, keepdims=True)
        scores = (queries / np.maximum(norms, 1e-12)) @ self.table.T  # (n, ROWS): BLAS
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        best = np.take_along_axis(scores, top, axis=1)
        order = np.argsort(-best, axis=1)
        # float32 carries about 7 significant digits: 6 decimals are all that is known
        return Neighbours(indices=np.take_along_axis(top, order, axis=1).tolist(),
                          scores=np.round(np.take_along_axis(best, order, axis=1), 6).tolist())
