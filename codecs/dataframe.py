"""The DataFrame codec: `pandas.DataFrame` with `DataframeSchema(orient, columns, dtypes)`.

JSON forms, as pandas writes them:
- `orient="records"`: `[{"a": 1, "b": "x"}, ...]` (`df.to_dict(orient="records")`);
- `orient="columns"`: `{"a": [1, 2], "b": ["x", "y"]}` (`df.to_dict(orient="list")`).
Cells are JSON scalars; `null` is a missing number (NaN). gRPC carries a
`tensorwire.v1.DataFrame`: the column names and one 1-D Tensor per column (numbers and
booleans as raw bytes, strings in `strings`), plus the index when it is not 0..n-1.

The same rules hold on both wires: the declared columns exactly (missing and extra ones
are errors at the column's location), equal column lengths, one kind of value per
column (a string column holds only strings), then the declared `dtypes`.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic_core import PydanticCustomError
from pydantic_core import core_schema as cs

from ..validators import ContentType, DataframeSchema, DType, FieldNumber, Shape
from ..wire import dtypes
from ..wire import tensors as prototensor
from ..wire.field_error import FieldError
from .core import Codec, Scope
from .http_facet import HttpFacet
from .jsonarray import cast
from .jsonschema import FRAME_FORMAT
from .markers import CodecMarker
from .proto_facet import MessageProto
from .v2_facet import Tensor, TensorMeta, V2Facet, oip_datatype


def _custom(type_: str, msg: str) -> Exception:
    return PydanticCustomError(type_, "{msg}", {"msg": msg})


class FrameSchema(CodecMarker):
    """The pydantic face of a DataFrame codec."""

    def __init__(self, codec: DataFrameCodec) -> None:
        self.codec = codec

    def __repr__(self) -> str:
        return f"FrameSchema({self.codec.schema})"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        return self.codec.core_schema()

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return self.codec.json_schema()


class DataFrameCodec(Codec):
    """`pandas.DataFrame`: records or columns in JSON, `tensorwire.v1.DataFrame` in gRPC."""

    def __init__(self, python_type: Any, schema: DataframeSchema,
                 metadata: tuple[Any, ...] = ()) -> None:
        self.schema = schema
        self.columns = list(schema.columns) if schema.columns is not None else None
        self.casts = {c: dtypes.resolve(d) for c, d in (schema.dtypes or {}).items()}
        unknown = set(self.casts) - set(self.columns or self.casts)
        if unknown:
            raise TypeError(f"DataframeSchema dtypes name undeclared columns {sorted(unknown)}")
        super().__init__(python_type, Annotated[(pd.DataFrame, FrameSchema(self), *metadata)])
        self.http = HttpFacet(self)
        self.proto = FrameProto(self, "tensorwire.v1.DataFrame")
        self.v2 = FrameV2(self)
        self.batch = FRAME_BATCHING

    def __repr__(self) -> str:
        return f"DataFrameCodec({self.schema})"

    # ----------------------------------------------------------------- pydantic
    def core_schema(self) -> Any:
        cell = cs.no_info_plain_validator_function(_cell)
        if self.schema.orient == "records":
            row = (cs.typed_dict_schema(
                {c: cs.typed_dict_field(cell, required=True) for c in self.columns},
                extra_behavior="forbid") if self.columns is not None
                else cs.dict_schema(cs.str_schema(), cell))
            shape = cs.list_schema(row)
            build = self._from_records
        else:
            column = cs.list_schema(cell)
            shape = (cs.typed_dict_schema(
                {c: cs.typed_dict_field(column, required=True) for c in self.columns},
                extra_behavior="forbid") if self.columns is not None
                else cs.dict_schema(cs.str_schema(), column))
            build = self._from_columns
        structured = cs.no_info_after_validator_function(
            build, cs.no_info_wrap_validator_function(self._check_orient, shape))
        return cs.json_or_python_schema(
            json_schema=structured,
            python_schema=cs.no_info_wrap_validator_function(self._validate_python, structured),
            serialization=cs.plain_serializer_function_ser_schema(
                self.serialize, info_arg=True, when_used="always"),
        )

    def _check_orient(self, value: Any, handler: Any) -> Any:
        records = self.schema.orient == "records"
        if records and not isinstance(value, list):
            raise _custom("dataframe_orient", "expected a list of records (orient='records'), "
                          f"got {_json_kind(value)}")
        if not records and not isinstance(value, dict):
            raise _custom("dataframe_orient", "expected an object of columns "
                          f"(orient='columns'), got {_json_kind(value)}")
        return handler(value)

    def _validate_python(self, value: Any, handler: Any) -> Any:
        if isinstance(value, pd.DataFrame):
            try:
                return self._finish(value)
            except FieldError as exc:
                raise _custom(exc.type, exc.msg) from None
        return handler(value)

    def _from_records(self, rows: list[dict[str, Any]]) -> pd.DataFrame:
        columns = self.columns
        if columns is None:
            columns = list(rows[0]) if rows else []
            for i, row in enumerate(rows):
                if set(row) != set(columns):
                    raise _custom("dataframe_columns", f"record {i} has columns {list(row)} "
                                  f"where record 0 has {columns}")
        data = {c: [row[c] for row in rows] for c in columns}
        return self._build(data, columns)

    def _from_columns(self, data: dict[str, list[Any]]) -> pd.DataFrame:
        columns = self.columns if self.columns is not None else list(data)
        lengths = {c: len(data[c]) for c in columns}
        if len(set(lengths.values())) > 1:
            first = columns[0]
            other = next(c for c in columns if lengths[c] != lengths[first])
            raise _custom("dataframe_ragged", f"ragged columns: {other!r} has "
                          f"{lengths[other]} values where {first!r} has {lengths[first]}")
        return self._build(data, columns)

    def _build(self, data: dict[str, list[Any]], columns: list[str]) -> pd.DataFrame:
        series = {}
        try:
            for c in columns:
                series[c] = _column(c, data[c])
            frame = pd.DataFrame(series, columns=columns)
            return self._finish(frame)
        except FieldError as exc:
            raise _custom(exc.type, exc.msg) from None

    def _finish(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Column set and order as declared, one kind per column, then the dtypes."""
        names = [str(c) for c in frame.columns]
        if len(set(names)) != len(names):
            raise FieldError(f"duplicated column names in {names}", type="dataframe_columns")
        if self.columns is not None and names != self.columns:
            missing = [c for c in self.columns if c not in names]
            extra = [c for c in names if c not in self.columns]
            if missing or extra:
                parts = []
                if missing:
                    parts.append(f"missing column(s) {', '.join(map(repr, missing))}")
                if extra:
                    parts.append(f"unexpected column(s) {', '.join(map(repr, extra))}")
                raise FieldError("; ".join(parts) + f" (expected {self.columns})",
                                 type="dataframe_columns")
            frame = frame[self.columns]
        for c in frame.columns:
            if frame[c].dtype == object:
                _check_strings(str(c), frame[c].to_numpy())
        for c, spec in self.casts.items():
            frame[c] = _cast(c, frame[c], spec)
        return frame

    def serialize(self, value: Any, info: Any) -> Any:
        if not info.mode_is_json():
            return value
        frame = value if isinstance(value, pd.DataFrame) else self.adapter.validate_python(value)
        frame = frame.rename(columns=str)
        if self.schema.orient == "records":
            return frame.to_dict(orient="records")
        return frame.to_dict(orient="list")

    def json_schema(self) -> dict[str, Any]:
        columns = self.columns
        if self.schema.orient == "records":
            row: dict[str, Any] = {"type": "object"}
            if columns is not None:
                row |= {"properties": {c: self._cell_schema(c) for c in columns},
                        "required": list(columns), "additionalProperties": False}
            schema: dict[str, Any] = {"type": "array", "items": row}
        else:
            schema = {"type": "object"}
            if columns is not None:
                schema |= {"properties": {c: {"type": "array", "items": self._cell_schema(c)}
                                          for c in columns},
                           "required": list(columns), "additionalProperties": False}
            else:
                schema["additionalProperties"] = {"type": "array"}
        schema |= {"format": FRAME_FORMAT, "orient": self.schema.orient}
        if columns is not None:
            schema["columns"] = list(columns)
        if self.casts:
            schema["dtypes"] = {c: s.name for c, s in self.casts.items()}
        return schema

    def _cell_schema(self, column: str) -> dict[str, Any]:
        spec = self.casts.get(column)
        return {"type": spec.json_type} if spec is not None else {}


class FrameProto(MessageProto):
    """A `tensorwire.v1.DataFrame`: column names and one 1-D tensor per column."""

    codec: DataFrameCodec

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        columns = self.codec.columns
        names = list(raw.columns)
        if len(names) != len(raw.data):
            raise FieldError(f"{len(names)} column names but {len(raw.data)} column tensors",
                             type="dataframe_columns")
        if columns is not None:
            for c in columns:
                if c not in names:
                    raise FieldError("Field required", loc=(c,), type="missing")
            for c in names:
                if c not in columns:
                    raise FieldError("Extra inputs are not permitted", loc=(c,),
                                     type="extra_forbidden")
        data: dict[str, np.ndarray] = {}
        length = None
        for name, tensor in zip(names, raw.data, strict=True):
            try:
                array = prototensor.to_numpy(tensor, strings="object")
            except FieldError as exc:
                raise exc.under(name) from None
            if array.ndim != 1:
                raise FieldError(f"a column is a 1-D tensor, got shape {list(array.shape)}",
                                 loc=(name,), type="dataframe_column")
            if length is None:
                length = len(array)
            elif len(array) != length:
                raise FieldError(f"ragged columns: {name!r} has {len(array)} values where "
                                 f"{names[0]!r} has {length}", loc=(name,),
                                 type="dataframe_ragged")
            if name in data:
                raise FieldError("duplicated column", loc=(name,), type="dataframe_columns")
            data[name] = array
        index = None
        if raw.HasField("index"):
            try:
                index = prototensor.to_numpy(raw.index, strings="object")
            except FieldError as exc:
                raise exc.under("index") from None
            if index.ndim != 1 or len(index) != (length or 0):
                raise FieldError(f"the index must be 1-D of the frame's {length or 0} rows, "
                                 f"got shape {list(index.shape)}", loc=("index",),
                                 type="dataframe_index")
        return pd.DataFrame(data, columns=names, index=index)

    def fill(self, value: Any, msg: Any) -> None:
        frame = value if isinstance(value, pd.DataFrame) else self.codec.adapter.validate_python(
            value)
        msg.SetInParent()
        for name in frame.columns:
            column = frame[name]
            try:
                array = _wire_column(str(name), column)
                prototensor.fill(array, msg.data.add())
            except FieldError as exc:
                raise exc.under(str(name)) from None
            msg.columns.append(str(name))
        index = frame.index
        if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
            prototensor.fill(_wire_column("index", index.to_series()), msg.index)


class FrameV2(V2Facet):
    """One tensor per column, named after it, as MLServer's pandas codec sends a frame:
    shape [n] (or [n, 1]), BYTES for strings; the datatype of a column with a declared
    dtype is that dtype's. A frame whose columns are not declared takes every input
    no other field of its API reads. The index does not travel."""

    elementwise = False
    codec: DataFrameCodec

    def __init__(self, codec: DataFrameCodec) -> None:
        super().__init__(codec, None)

    @property
    def unsupported(self) -> str | None:
        for c, spec in self.codec.casts.items():
            if oip_datatype(spec) is None:
                return f"column {c!r}: {spec.name} has no Open Inference Protocol datatype"
        return None

    def tensors(self, name: str) -> list[TensorMeta]:
        columns = self.codec.columns or []
        return [TensorMeta(c, oip_datatype(self.codec.casts.get(c)) or "", (-1,))
                for c in columns]

    def input_names(self, name: str) -> tuple[str, ...] | None:
        columns = self.codec.columns
        return None if columns is None else tuple(columns)

    def output_tensors(self) -> list[TensorMeta]:
        return self.tensors("")

    def decode(self, name: str, inputs: Any, scope: Scope) -> Any:
        data: dict[str, np.ndarray] = {}
        length = None
        for column, tensor in inputs.items():
            array = tensor.array
            if array.ndim == 2 and array.shape[1] == 1:
                array = array.reshape(-1)
            if array.ndim != 1:
                raise FieldError(f"a column is shape [n] (or [n, 1]), got "
                                 f"{list(tensor.array.shape)}", loc=(column,),
                                 type="dataframe_column")
            if length is not None and len(array) != length:
                first = next(iter(data))
                raise FieldError(f"ragged columns: {column!r} has {len(array)} values where "
                                 f"{first!r} has {length}", loc=(column,),
                                 type="dataframe_ragged")
            length = len(array)
            if array.dtype == object:  # BYTES: a column of strings
                try:
                    array = _texts(array)
                except FieldError as exc:
                    raise exc.under(column) from None
            data[column] = array
        return pd.DataFrame(data, columns=list(data))

    def encode(self, name: str, value: Any) -> list[Tensor]:
        frame = value if isinstance(value, pd.DataFrame) else self.codec.adapter.validate_python(
            value)
        out = []
        for column in frame.columns:
            try:
                out.append(Tensor(str(column), _wire_column(str(column), frame[column])))
            except FieldError as exc:
                raise exc.under(str(column)) from None
        return out

    def encode_outputs(self, value: Any) -> list[Tensor]:
        return self.encode("", value)


def _texts(array: np.ndarray) -> np.ndarray:
    out = np.empty(len(array), dtype=object)
    for i, item in enumerate(array):
        try:
            out[i] = item.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FieldError(f"a BYTES element is not UTF-8 text: {exc.reason}",
                             loc=(i,), type="dataframe_column") from None
    return out


class FrameBatching:
    """DataFrames batch along their rows; the pieces get a fresh 0..n-1 index."""

    def size(self, value: Any, dim: int) -> int:
        if dim != 0:
            raise FieldError(f"a DataFrame batches along its rows (dimension 0), not {dim}",
                             type="batch_dim")
        return len(value)

    def concat(self, values: list[Any], dim: int) -> Any:
        return pd.concat(values, axis=0, ignore_index=True)

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        out, start = [], 0
        for n in sizes:
            out.append(value.iloc[start:start + n].reset_index(drop=True))
            start += n
        return out


FRAME_BATCHING = FrameBatching()


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise _custom("dataframe_cell", "a cell is a number, a string, a boolean or null, "
                  f"not {_json_kind(value)}")


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _column(name: str, values: list[Any]) -> np.ndarray:
    """One column from validated JSON cells: NumPy infers; mixed kinds are errors."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) > 1 and not kinds <= {int, float}:
        raise FieldError(f"column {name!r} mixes {', '.join(sorted(k.__name__ for k in kinds))}",
                         type="dataframe_column")
    if kinds == {str} or kinds == {bool}:
        if len(kinds) and any(v is None for v in values):
            raise FieldError(f"column {name!r}: null only stands for a missing number",
                             type="dataframe_column")
        if kinds == {str}:
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out
        return np.array(values, dtype=bool)
    if not kinds:  # all null, or no rows
        return np.full(len(values), np.nan)
    if any(v is None for v in values):
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    return np.array(values)


def _check_strings(name: str, values: np.ndarray) -> None:
    for v in values:
        if not isinstance(v, str):
            raise FieldError(f"column {name!r} holds {type(v).__name__} values beside "
                             "strings; a column holds one kind of value",
                             type="dataframe_column")


def _cast(name: str, column: pd.Series, spec: dtypes.DTypeSpec) -> pd.Series:
    values = column.to_numpy()
    if spec.is_string:
        if values.dtype != object:
            raise FieldError(f"column {name!r} must hold strings, got {values.dtype}",
                             type="dataframe_dtype")
        return column
    if values.dtype == object:
        raise FieldError(f"column {name!r} must hold {spec.name} values, got strings",
                         type="dataframe_dtype")
    try:
        return pd.Series(cast(values, spec), index=column.index, name=column.name)
    except FieldError as exc:
        raise FieldError(f"column {name!r}: {exc.msg}", type=exc.type) from None


def _wire_column(name: str, column: pd.Series) -> np.ndarray:
    array = column.to_numpy()
    if array.dtype == object:
        _check_strings(name, array)
        return np.array(array.tolist(), dtype=str) if len(array) else np.empty(0, "<U1")
    if dtypes.from_numpy(array.dtype) is None:
        raise FieldError(f"column {name!r} of dtype {array.dtype} has no tensor form; "
                         "convert it to numbers or strings", type="dataframe_dtype")
    return array


def build(base: Any, metadata: tuple[Any, ...], annotation: Any) -> DataFrameCodec:
    schema: DataframeSchema | None = None
    rest = []
    for m in metadata:
        if isinstance(m, DataframeSchema):
            if schema is not None and schema != m:
                raise TypeError("two different DataframeSchema annotations")
            schema = m
        elif isinstance(m, Shape | DType | ContentType):
            raise TypeError(f"{type(m).__name__} does not apply to pandas.DataFrame; "
                            "use DataframeSchema")
        elif not isinstance(m, FieldNumber):
            rest.append(m)
    try:
        return DataFrameCodec(base, schema or DataframeSchema(), tuple(rest))
    except ValueError as exc:
        raise TypeError(str(exc)) from None
