"""TensorFlow tensors in and out: numbers and strings, keyword and root inputs.

    curl -s localhost:3000/scale -H 'Content-Type: application/json' \\
         -d '{"x": [[1, 2, 3]], "factor": 0.5}'
"""

from __future__ import annotations

import typing as t

import tensorflow as tf

import tensorwire
from tensorwire.validators import DType, Shape

Rows = t.Annotated[tf.Tensor, Shape((-1, 3)), DType("float32")]


@tensorwire.service
class TfOps:
    """Small TensorFlow computations."""

    @tensorwire.api
    def scale(self, x: Rows, factor: float = 2.0) -> tf.Tensor:
        """Multiply every element by `factor`."""
        return x * tf.constant(factor, dtype=tf.float32)

    @tensorwire.api
    def row_sums(self, x: Rows, /) -> t.Annotated[tf.Tensor, DType("float32")]:
        """Root input: sum of each row."""
        return tf.reduce_sum(x, axis=1)

    @tensorwire.api
    def shout(self, words: t.Annotated[tf.Tensor, Shape((-1,)), DType("string")]
              ) -> tf.Tensor:
        """Upper-case a vector of strings."""
        return tf.strings.upper(words)
