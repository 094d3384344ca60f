"""The DataFrame codec: records/columns JSON and typed column tensors, one rule set."""

from __future__ import annotations

import typing as t

import numpy as np
import pandas as pd
import pytest
from pydantic import TypeAdapter, ValidationError

from tensorwire import v1
from tensorwire.codecs import REPLY, FieldError, codec_for
from tensorwire.codecs.dataframe import DataFrameCodec
from tensorwire.validators import DataframeSchema, DType, Shape

Records = t.Annotated[pd.DataFrame, DataframeSchema(orient="records", columns=["a", "b"])]
Columns = t.Annotated[pd.DataFrame, DataframeSchema(orient="columns", columns=["a", "b"])]


def adapter(annotation: t.Any) -> TypeAdapter[t.Any]:
    return TypeAdapter(codec_for(annotation).annotation)


def errors(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple[tuple, str, str]]:
    return [(e["loc"], e["type"], e["msg"]) for e in exc.value.errors()]


def test_definition() -> None:
    assert isinstance(codec_for(pd.DataFrame), DataFrameCodec)
    with pytest.raises(TypeError, match=r"Shape does not apply to pandas\.DataFrame"):
        codec_for(t.Annotated[pd.DataFrame, Shape((1,))])
    with pytest.raises(TypeError, match="DType does not apply"):
        codec_for(t.Annotated[pd.DataFrame, DType("float32")])
    with pytest.raises(TypeError, match="unknown dtype"):
        codec_for(t.Annotated[pd.DataFrame, DataframeSchema(columns=["a"],
                                                            dtypes={"a": "float33"})])
    with pytest.raises(TypeError, match="undeclared columns"):
        codec_for(t.Annotated[pd.DataFrame, DataframeSchema(columns=["a"],
                                                            dtypes={"z": "int8"})])


def test_records_and_columns_round_trip_as_pandas_writes_them() -> None:
    frame = pd.DataFrame({"a": [1.5, 2.0], "b": ["x", "y"]})
    records = adapter(Records)
    text = records.dump_json(frame)
    assert text == b'[{"a":1.5,"b":"x"},{"a":2.0,"b":"y"}]'
    pd.testing.assert_frame_equal(records.validate_json(text), frame)
    columns = adapter(Columns)
    text = columns.dump_json(frame)
    assert text == b'{"a":[1.5,2.0],"b":["x","y"]}'
    pd.testing.assert_frame_equal(columns.validate_json(text), frame)


def test_null_is_a_missing_number() -> None:
    out = adapter(Records).validate_json(b'[{"a": 1, "b": "x"}, {"a": null, "b": "y"}]')
    assert out["a"].dtype == np.float64 and np.isnan(out["a"][1])
    assert adapter(Records).dump_json(out) == b'[{"a":1.0,"b":"x"},{"a":null,"b":"y"}]'


@pytest.mark.parametrize(("annotation", "body", "expected"), [
    (Records, b'[{"a": 1}]', [((0, "b"), "missing", "Field required")]),
    (Records, b'[{"a": 1, "b": "x", "c": 2}]',
     [((0, "c"), "extra_forbidden", "Extra inputs are not permitted")]),
    (Records, b'{"a": [1], "b": ["x"]}',
     [((), "dataframe_orient", "expected a list of records (orient='records'), got an object")]),
    (Columns, b'[{"a": 1, "b": "x"}]',
     [((), "dataframe_orient", "expected an object of columns (orient='columns'), got an array")]),
    (Columns, b'{"a": [1, 2], "b": ["x"]}',
     [((), "dataframe_ragged", "ragged columns: 'b' has 1 values where 'a' has 2")]),
    (Columns, b'{"a": [1]}', [(("b",), "missing", "Field required")]),
    (Records, b'[{"a": "q", "b": "x"}, {"a": 1, "b": "y"}]',
     [((), "dataframe_column", "column 'a' mixes int, str")]),
    (Records, b'[{"a": [1], "b": "x"}]',
     [((0, "a"), "dataframe_cell",
       "a cell is a number, a string, a boolean or null, not an array")]),
    (Records, b'[{"a": 1, "b": "x"}, {"a": 2, "b": null}]',
     [((), "dataframe_column", "column 'b': null only stands for a missing number")]),
])
def test_json_rejections_point_at_the_column(annotation: t.Any, body: bytes,
                                             expected: list) -> None:
    with pytest.raises(ValidationError) as exc:
        adapter(annotation).validate_json(body)
    assert errors(exc) == expected


def test_declared_dtypes_apply_after_the_shape_checks() -> None:
    ta = adapter(t.Annotated[pd.DataFrame, DataframeSchema(
        orient="columns", columns=["n", "s"], dtypes={"n": "int16", "s": "string"})])
    out = ta.validate_json(b'{"n": [1, 2.0], "s": ["a", "b"]}')
    assert out["n"].dtype == np.int16
    with pytest.raises(ValidationError, match="column 'n': int16 elements must be whole"):
        ta.validate_json(b'{"n": [1.5], "s": ["a"]}')
    with pytest.raises(ValidationError, match="column 's' must hold strings"):
        ta.validate_json(b'{"n": [1], "s": [2]}')


def test_undeclared_columns_must_be_consistent_across_records() -> None:
    ta = adapter(pd.DataFrame)
    assert list(ta.validate_json(b'[{"x": 1, "y": 2}, {"y": 3, "x": 4}]').columns) == ["x", "y"]
    with pytest.raises(ValidationError, match="record 1 has columns"):
        ta.validate_json(b'[{"x": 1}, {"y": 3}]')


def test_python_mode_checks_frames_and_orders_columns() -> None:
    ta = adapter(Records)
    out = ta.validate_python(pd.DataFrame({"b": ["x"], "a": [1]}))
    assert list(out.columns) == ["a", "b"]
    with pytest.raises(ValidationError, match="missing column\\(s\\) 'b'"):
        ta.validate_python(pd.DataFrame({"a": [1]}))
    with pytest.raises(ValidationError, match="unexpected column\\(s\\) 'c'"):
        ta.validate_python(pd.DataFrame({"a": [1], "b": ["x"], "c": [0]}))


# ---------------------------------------------------------------------- protobuf


def test_proto_one_typed_tensor_per_column() -> None:
    codec = codec_for(Records)
    frame = pd.DataFrame({"a": np.array([1, 2], np.int32), "b": ["x", "é"]})
    msg = v1.DataFrame()
    codec.proto.fill(frame, msg)
    assert list(msg.columns) == ["a", "b"]
    assert msg.data[0].dtype == v1.DType.values_by_name["INT32"].number
    assert len(msg.data[0].data) == 8
    assert list(msg.data[1].strings) == ["x", "é"] and not msg.HasField("index")
    back = codec.proto.from_proto(v1.DataFrame.FromString(msg.SerializeToString()), REPLY)
    pd.testing.assert_frame_equal(adapter(Records).validate_python(back), frame)


def test_proto_carries_a_non_default_index() -> None:
    codec = codec_for(pd.DataFrame)
    frame = pd.DataFrame({"a": [1.0, 2.0]}, index=[10, 20])
    msg = v1.DataFrame()
    codec.proto.fill(frame, msg)
    back = codec.proto.from_proto(msg, REPLY)
    assert back.index.tolist() == [10, 20]


def column(values: np.ndarray) -> t.Any:
    msg = v1.Tensor()
    from tensorwire.wire import tensors as prototensor

    prototensor.fill(values, msg)
    return msg


def frame_msg(columns: list[str], tensors: list[t.Any]) -> t.Any:
    msg = v1.DataFrame()
    msg.columns.extend(columns)
    for tensor in tensors:
        msg.data.add().CopyFrom(tensor)
    return msg


@pytest.mark.parametrize(("msg", "loc", "match"), [
    (frame_msg(["a"], [column(np.zeros(2))]), ("b",), "Field required"),
    (frame_msg(["a", "b", "c"], [column(np.zeros(1))] * 3), ("c",), "Extra inputs"),
    (frame_msg(["a", "b"], [column(np.zeros(2)), column(np.array(["x"]))]), ("b",),
     "ragged columns: 'b' has 1 values where 'a' has 2"),
    (frame_msg(["a", "b"], [column(np.zeros((2, 2))), column(np.zeros(2))]), ("a",),
     "1-D tensor"),
    (frame_msg(["a", "b"], [column(np.zeros(2))]), (), "2 column names but 1 column tensors"),
])
def test_proto_rejections(msg: t.Any, loc: tuple, match: str) -> None:
    with pytest.raises(FieldError, match=match) as exc:
        codec_for(Records).proto.from_proto(msg, REPLY)
    assert exc.value.loc == loc


def test_proto_lying_column_bytes_point_at_the_column() -> None:
    bad = column(np.zeros(2, np.float32))
    bad.data = bad.data[:-1]
    with pytest.raises(FieldError, match="needs 8 bytes, data has 7") as exc:
        codec_for(Records).proto.from_proto(
            frame_msg(["a", "b"], [bad, column(np.array(["x"]))]), REPLY)
    assert exc.value.loc == ("a",)


def test_columns_without_a_tensor_form_are_refused_on_output() -> None:
    frame = pd.DataFrame({"a": pd.to_datetime(["2024-01-01"]), "b": ["x"]})
    with pytest.raises(FieldError, match="datetime64") as exc:
        codec_for(Records).proto.fill(frame, v1.DataFrame())
    assert exc.value.loc == ("a",)
