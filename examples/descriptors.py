"""`tensorwire.IODescriptor` models with tensor fields, as inputs and outputs.

    curl -s localhost:3000/nearest -H 'Content-Type: application/json' -d \\
      '{"query": {"vector": [1, 0], "label": "q"}, "candidates": [[1, 0], [0, 1]]}'
"""

from __future__ import annotations

import typing as t

import numpy as np
from pydantic import Field

import tensorwire
from tensorwire.validators import DType, Shape


class Embedding(tensorwire.IODescriptor):
    """A labelled half-precision vector."""

    vector: t.Annotated[np.ndarray, Shape((-1,)), DType("float16")] = Field(
        description="The embedding (float16).")
    label: str = Field(min_length=1)


class Ranking(tensorwire.IODescriptor):
    """Cosine similarities of the candidates to the query, and the best one."""

    scores: np.ndarray[tuple[int], np.dtype[np.float16]]
    best: int
    query: Embedding


@tensorwire.service
class Retrieval:
    """Nearest-neighbour search over float16 embeddings."""

    @tensorwire.api
    def nearest(self, query: Embedding,
                candidates: t.Annotated[np.ndarray, Shape((-1, -1)), DType("float16")]
                ) -> Ranking:
        """Rank `candidates` (rows) by cosine similarity to `query`."""
        if candidates.shape[1] != query.vector.shape[0]:
            raise tensorwire.errors.InvalidArgument.at(
                ["candidates"], f"rows must have {query.vector.shape[0]} elements")
        q = query.vector.astype(np.float32)
        c = candidates.astype(np.float32)
        norms = np.linalg.norm(c, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        scores = (c @ q / np.maximum(norms, 1e-12)).astype(np.float16)
        return Ranking(scores=scores, best=int(np.argmax(scores)), query=query)

    @tensorwire.api(input_spec=Embedding)
    def normalize(self, **params: t.Any) -> Embedding:
        """input_spec: the Embedding's fields are the top-level object."""
        v = params["vector"].astype(np.float32)
        v = v / max(float(np.linalg.norm(v)), 1e-12)
        return Embedding(vector=v.astype(np.float16), label=params["label"].lower())
