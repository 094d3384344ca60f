"""`V2Model`: each API as an Open Inference Protocol model, from its APISpec alone."""

from __future__ import annotations

import typing as t
from collections.abc import Generator

import numpy as np
import pandas as pd
import pytest
from pydantic import Field

import tensorwire
from examples.descriptors import Retrieval
from examples.frames import Frames
from examples.iris import Iris
from examples.llm_stream import LanguageModel
from examples.quickstart import Quickstart, Summary
from tensorwire.codecs.v2_facet import Tensor, TensorMeta
from tensorwire.errors import InvalidArgument, Unimplemented
from tensorwire.v2.model import V2Model
from tensorwire.validators import DataframeSchema, DType, Shape


def model(service: type, api: str) -> V2Model:
    return V2Model(tensorwire.get_service_spec(service).apis[api])


def meta(tensors: list) -> list[tuple[str, str, list[int]]]:
    return [(m.name, m.datatype, list(m.shape)) for m in tensors]


def test_inputs_are_the_fields_and_a_model_output_is_one_output_per_field() -> None:
    m = model(Quickstart, "summarize")
    assert (m.name, m.version, m.unsupported) == ("summarize", "1", None)
    assert meta(m.inputs) == [("text", "BYTES", [1]), ("max_words", "INT64", [1])]
    assert meta(m.outputs) == [("summary", "BYTES", [1]), ("words", "INT64", [1])]
    assert m.metadata() == {
        "name": "summarize", "versions": ["1"], "platform": "tensorwire",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1]},
                   {"name": "max_words", "datatype": "INT64", "shape": [1]}],
        "outputs": [{"name": "summary", "datatype": "BYTES", "shape": [1]},
                    {"name": "words", "datatype": "INT64", "shape": [1]}]}


def test_tensors_single_outputs_and_frames() -> None:
    classify = model(Iris, "classify")
    assert meta(classify.inputs) == [("x", "FP32", [1, 4])]
    assert meta(classify.outputs) == [("result", "", [-1])]  # np.ndarray: any dtype/shape
    assert classify.raw_input == TensorMeta("x", "FP32", (1, 4))
    assert meta(model(Iris, "species").outputs) == [("result", "BYTES", [-1])]
    totals = model(Frames, "totals")
    assert meta(totals.inputs) == [("item", "", [-1]), ("qty", "INT64", [-1]),
                                   ("price", "", [-1])]
    assert totals.outputs == [] and not totals.static_outputs  # columns known on return
    assert totals.raw_input is None  # three inputs: no raw body
    nearest = model(Retrieval, "nearest")
    assert meta(nearest.inputs) == [("query", "BYTES", [1]), ("candidates", "FP16", [-1, -1])]
    assert nearest.inputs[0].parameters == {"content_type": "application/json"}


def test_a_stream_is_a_decoupled_model_that_model_infer_refuses() -> None:
    """Triton's decoupled models: a generator's outputs are each chunk's, a streamed
    input's inputs each element's; only ModelStreamInfer serves them."""
    m = model(LanguageModel, "generate")
    assert m.unsupported is None and m.decoupled and not m.streams_in
    assert [(t.name, t.datatype) for t in m.outputs] == [("result", "BYTES")]
    assert "error" not in m.metadata()
    m.refuse_if_unsupported()
    with pytest.raises(Unimplemented, match=r"model 'generate' is decoupled .* "
                                            r"ModelStreamInfer"):
        m.refuse_if_decoupled()
    from tests.support.stream_services import Streams

    total = model(Streams, "total")
    assert total.decoupled and total.streams_in and total.unsupported is None
    assert [(t.name, t.datatype, t.shape) for t in total.inputs] == [
        ("frames", "FP32", (-1,))]
    model(Quickstart, "summarize").refuse_if_decoupled()  # one value, one answer


@tensorwire.service
class Clashes:
    @tensorwire.api
    def column_named_like_a_field(
        self, qty: int,
        df: t.Annotated[pd.DataFrame, DataframeSchema(columns=["qty"])],
    ) -> int:
        return qty

    @tensorwire.api
    def complex_out(self, x: int) -> t.Annotated[np.ndarray, DType("complex64")]:
        return np.zeros(1, np.complex64)

    @tensorwire.api
    def ticks(self, n: int) -> Generator[int, None, None]:
        yield n

    @tensorwire.api
    def scaled(self, x: t.Annotated[np.ndarray, Shape((-1,)), DType("float32")],
               factor: float = Field(default=2.0, gt=0)) -> np.ndarray:
        return x * factor


def test_apis_the_protocol_cannot_carry_say_why() -> None:
    spec = tensorwire.get_service_spec(Clashes)
    reasons = {name: V2Model(api).unsupported for name, api in spec.apis.items()}
    assert reasons["column_named_like_a_field"] == (
        "input name 'qty' is used twice (a field and a column?)")
    assert reasons["complex_out"] == (
        "output: complex64 tensors have no Open Inference Protocol datatype")
    assert reasons["ticks"] is None  # a stream: a decoupled model
    assert reasons["scaled"] is None


def test_decoding_validates_as_the_native_routes_and_names_the_input() -> None:
    m = model(Clashes, "scaled")
    x = np.arange(3, dtype=np.float32)
    kwargs = m.decode({"x": Tensor("x", x)}, None)
    assert kwargs["x"] is x and kwargs["factor"] == 2.0  # the default when left out
    with pytest.raises(InvalidArgument) as info:
        m.decode({"x": Tensor("x", x.astype(np.float64))}, None)
    assert info.value.message == "x: expected dtype float32, got float64"
    with pytest.raises(InvalidArgument) as info:
        m.decode({"x": Tensor("x", x), "factor": Tensor("factor", np.array([-1.0]))}, None)
    assert info.value.detail[0]["loc"] == ["factor"]
    assert "greater than 0" in info.value.message
    with pytest.raises(InvalidArgument, match=r"^x: Field required$"):
        m.decode({}, None)
    with pytest.raises(InvalidArgument) as info:
        m.decode({"x": Tensor("x", x), "y": Tensor("y", x)}, None)
    assert info.value.message == "y: unknown input; this model takes: x, factor"


def test_requested_outputs_are_checked_when_known_before_the_call() -> None:
    m = model(Quickstart, "summarize")
    m.check_requested(["words"])
    with pytest.raises(InvalidArgument) as info:
        m.check_requested(["nope"])
    assert info.value.message == "outputs.nope: unknown output; this model has: summary, words"
    model(Quickstart, "count").check_requested(["anything"])  # a dict: keys come later


def test_encoding_leaves_none_out() -> None:
    summary, words = model(Quickstart, "summarize").encode(Summary(summary="a", words=1))
    assert (summary.name, summary.array.tolist(), words.array.tolist()) == (
        "summary", [b"a"], [1])
    (upper,) = model(Quickstart, "upper").encode("HI")
    assert (upper.name, upper.array.tolist()) == ("result", [b"HI"])
