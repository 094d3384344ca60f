"""Batching of models whose fields all batch: `Prediction(label=[N], probabilities=[N, 10])`.

A batchable classifier returns one model for the whole batch; the batcher measures it,
splits it field by field into one model per request, and concatenates model inputs
the same way. A model with any field that cannot batch (a scalar) does not batch.
"""

from __future__ import annotations

import typing as t

import numpy as np
import pytest
import torch
from pydantic import BaseModel

import tensorwire
from tensorwire.codecs import FieldError, codec_for
from tensorwire.validators import DType, Shape


class Prediction(tensorwire.IODescriptor):
    label: t.Annotated[np.ndarray, Shape((-1,)), DType("int64")]
    probabilities: t.Annotated[np.ndarray, Shape((-1, 3)), DType("float32")]


class TorchPair(tensorwire.IODescriptor):
    a: t.Annotated[torch.Tensor, DType("float32")]
    tags: list[str]


class WithScalar(tensorwire.IODescriptor):
    label: t.Annotated[np.ndarray, Shape((-1,)), DType("int64")]
    model_name: str


class Plain(BaseModel):
    scores: list[float]
    names: list[str]


def prediction(n: int, start: int = 0) -> Prediction:
    label = np.arange(start, start + n, dtype=np.int64)
    probs = np.arange(3 * start, 3 * (start + n), dtype=np.float32).reshape(n, 3)
    return Prediction(label=label, probabilities=probs)


def test_a_model_batches_only_when_every_field_does():
    assert codec_for(Prediction).batch is not None
    assert codec_for(TorchPair).batch is not None
    assert codec_for(Plain).batch is not None
    assert codec_for(WithScalar).batch is None


def test_split_then_concat_round_trips_field_by_field():
    codec = codec_for(Prediction)
    whole = prediction(6)
    assert codec.batch.size(whole, 0) == 6
    pieces = codec.batch.split(whole, [1, 3, 2], 0)
    assert [type(p) for p in pieces] == [Prediction] * 3
    assert [codec.batch.size(p, 0) for p in pieces] == [1, 3, 2]
    np.testing.assert_array_equal(pieces[1].label, [1, 2, 3])
    np.testing.assert_array_equal(pieces[2].probabilities, whole.probabilities[4:])
    again = codec.batch.concat(pieces, 0)
    assert isinstance(again, Prediction)
    np.testing.assert_array_equal(again.label, whole.label)
    np.testing.assert_array_equal(again.probabilities, whole.probabilities)


def test_torch_and_list_fields_and_plain_dicts():
    codec = codec_for(TorchPair)
    value = TorchPair(a=torch.arange(8, dtype=torch.float32).reshape(4, 2), tags=list("abcd"))
    first, rest = codec.batch.split(value, [1, 3], 0)
    assert first.tags == ["a"] and torch.equal(rest.a, value.a[1:])
    # an output returned as a dict stays a dict (validated into the model when written)
    plain = codec_for(Plain)
    parts = plain.batch.split({"scores": [0.5, 1.5], "names": ["x", "y"]}, [1, 1], 0)
    assert parts == [{"scores": [0.5], "names": ["x"]}, {"scores": [1.5], "names": ["y"]}]
    assert plain.batch.concat(parts, 0) == {"scores": [0.5, 1.5], "names": ["x", "y"]}


def test_fields_of_different_lengths_are_an_error_at_the_model():
    codec = codec_for(Plain)
    with pytest.raises(FieldError, match=r"scores=2, names=1") as info:
        codec.batch.size(Plain(scores=[1.0, 2.0], names=["x"]), 0)
    assert info.value.type == "batch_mismatch"


def test_a_field_without_the_batch_dimension_names_itself():
    codec = codec_for(TorchPair)
    with pytest.raises(FieldError) as info:
        codec.batch.size(TorchPair(a=torch.zeros(3), tags=["a", "b", "c"]), 1)
    assert info.value.loc[0] == "a"


def test_batchable_api_may_return_a_model_of_batchable_fields():
    @tensorwire.service
    class Classifier:
        @tensorwire.api(batchable=True)
        def classify(self, x: t.Annotated[np.ndarray, Shape((-1, 3))]) -> Prediction:
            return Prediction(label=x.argmax(axis=1), probabilities=x.astype(np.float32))

    assert tensorwire.get_service_spec(Classifier).apis["classify"].batchable


def test_batchable_api_returning_a_model_with_a_scalar_fails_at_definition():
    with pytest.raises(TypeError, match="or a model whose fields all are"):
        @tensorwire.service
        class Broken:
            @tensorwire.api(batchable=True)
            def classify(self, x: t.Annotated[np.ndarray, Shape((-1, 3))]) -> WithScalar:
                raise NotImplementedError
