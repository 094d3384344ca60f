"""Schema-driven HTTP kinds: what is walked, what is rebuilt, what is a file."""

from __future__ import annotations

import asyncio
import datetime as dt

import numpy as np
import pytest

from tensorwire.client import jsonkinds
from tensorwire.client.filedata import ClientFiles
from tensorwire.client.files import FileKind
from tensorwire.client.frames import FrameKind
from tensorwire.client.kinds import schema_kind
from tensorwire.client.response import BytesPayload
from tensorwire.client.tensors import NPY, TensorKind, dumps_npy
from tensorwire.wire.field_error import FieldError

UTC = dt.UTC
DATE = {"type": "string", "format": "date-time"}


def test_plain_json_is_never_walked():
    for schema in ({"type": "string"}, {"type": "array", "items": {"type": "number"}},
                   {"type": "object", "additionalProperties": {"type": "integer"}},
                   {"type": "object", "properties": {"a": {"type": "string"}}},
                   {"anyOf": [{"type": "integer"}, {"type": "null"}]}, {}):
        assert schema_kind(schema).trivial


def test_datetimes_and_durations_are_rebuilt_wherever_they_sit():
    schema = {"type": "object", "properties": {
        "when": DATE,
        "maybe": {"anyOf": [DATE, {"type": "null"}]},
        "many": {"type": "array", "items": DATE},
        "by_key": {"type": "object", "additionalProperties": DATE},
        "span": {"type": "string", "format": "duration"},
        "plain": {"type": "string"}}}
    kind = schema_kind(schema)
    value = kind.from_json({"when": "2024-01-02T03:04:05Z", "maybe": None,
                            "many": ["2024-01-01T00:00:00+02:00"],
                            "by_key": {"k": "2024-01-01T00:00:00Z"}, "span": "PT1M30S",
                            "plain": "2024-01-01T00:00:00Z", "extra": 1})
    assert value["when"] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert value["maybe"] is None
    assert value["many"][0].utcoffset() == dt.timedelta(hours=2)
    assert value["by_key"]["k"].tzinfo is not None
    assert value["span"] == dt.timedelta(seconds=90)
    assert value["plain"] == "2024-01-01T00:00:00Z" and value["extra"] == 1


def test_a_discriminated_union_decodes_the_branch_its_tag_names():
    cat = {"type": "object", "properties": {"kind": {"const": "cat", "type": "string"},
                                            "born": DATE}}
    dog = {"type": "object", "properties": {"kind": {"enum": ["dog"], "type": "string"},
                                            "walked": DATE}}
    kind = schema_kind({"oneOf": [cat, dog], "discriminator": {"propertyName": "kind"}})
    out = kind.from_json({"kind": "dog", "walked": "2024-01-01T00:00:00Z"})
    assert isinstance(out["walked"], dt.datetime)
    assert kind.from_json({"kind": "cow", "x": "2024"}) == {"kind": "cow", "x": "2024"}


def test_framework_types_plug_in_by_schema_shape():
    assert isinstance(schema_kind({"type": "array", "format": "numpy-array"}), TensorKind)
    assert isinstance(schema_kind({"type": "tensor", "format": "torch-tensor"}), TensorKind)
    assert isinstance(schema_kind({"format": "pandas-dataframe", "orient": "columns"}),
                      FrameKind)
    file_kind = schema_kind({"type": "file", "format": "image", "pil": True})
    assert isinstance(file_kind, FileKind) and file_kind.is_file and file_kind.image
    files = schema_kind({"type": "array", "items": {"type": "file"}})
    assert files.is_file and files.repeated_files
    model = schema_kind({"type": "object", "properties": {
        "x": {"type": "array", "format": "numpy-array"}, "n": {"type": "integer"}}})
    assert not model.trivial
    assert isinstance(model.from_json({"x": [[1, 2]], "n": 1})["x"], np.ndarray)


def test_tensor_json_and_npy_forms():
    kind = schema_kind({"type": "array", "format": "numpy-array", "dtype": "float16"})
    out = kind.from_json([[1, 2], [3, 4]])
    assert out.dtype == np.float16 and out.shape == (2, 2)
    assert kind.accept.startswith(NPY)
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    body = kind.body(array, None)  # converted to the declared dtype (same_kind casting)
    assert body.media_type == NPY
    decoded = asyncio.run(kind.from_payload(BytesPayload(body.data, NPY), None))
    assert decoded.dtype == np.float16 and np.array_equal(decoded, array)
    assert kind.to_json(array).dtype == np.float16  # orjson writes it natively
    with pytest.raises(FieldError, match="expected dtype float16, got complex128"):
        kind.to_json(np.zeros(2, complex))
    with pytest.raises(Exception, match="object"):
        dumps_npy(np.array([object()], dtype=object))


def test_npy_bodies_never_unpickle():
    import io

    from tensorwire.errors import ClientError

    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    kind = TensorKind({})
    with pytest.raises(ClientError, match=r"unreadable \.npy"):
        asyncio.run(kind.from_payload(BytesPayload(buf.getvalue(), NPY), None))


def test_file_outputs_become_paths_or_images(tmp_path):
    files = ClientFiles(tmp_path)
    kind = schema_kind({"type": "file", "format": "binary"})
    path = asyncio.run(kind.from_payload(BytesPayload(b"a,b\n", "text/csv", "../r.csv"), files))
    assert path.read_bytes() == b"a,b\n" and path.name == "r.csv"
    assert path.is_relative_to(tmp_path)
    unnamed = asyncio.run(kind.from_payload(BytesPayload(b"x", "application/pdf"), files))
    assert unnamed.suffix == ".pdf"
    image_module = pytest.importorskip("PIL.Image")
    import io

    png = io.BytesIO()
    image_module.new("L", (2, 2), 7).save(png, format="PNG")
    image_kind = schema_kind({"type": "file", "format": "image", "pil": True})
    image = asyncio.run(image_kind.from_payload(BytesPayload(png.getvalue(), "image/png"),
                                                files))
    assert image.size == (2, 2) and image.getpixel((1, 1)) == 7


def test_frames_in_both_orients():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    records = schema_kind({"format": "pandas-dataframe", "orient": "records"})
    columns = schema_kind({"format": "pandas-dataframe", "orient": "columns",
                           "columns": ["a", "b"]})
    assert records.to_json(frame) == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert columns.to_json(frame) == {"a": [1, 2], "b": ["x", "y"]}
    pd.testing.assert_frame_equal(records.from_json(records.to_json(frame)), frame)
    pd.testing.assert_frame_equal(columns.from_json(columns.to_json(frame)), frame)


def test_summaries():
    """Python's names, as the gRPC transport gives them (tests/unit/client/test_protokinds.py)."""
    assert jsonkinds.summarize({"type": "array", "items": {"type": "integer"}}) == "list[int]"
    assert jsonkinds.summarize({"enum": ["a", "b"]}) == "'a' | 'b'"
    assert jsonkinds.summarize({"type": "file", "content_type": "audio/mp3"}) == "file"
    assert jsonkinds.summarize({"type": "file", "format": "bytes"}) == "bytes"
    assert jsonkinds.summarize({"anyOf": [{"type": "number"}, {"type": "null"}]}) == "float"
    assert jsonkinds.summarize({"type": "string", "format": "date-time"}) == "datetime"
    assert jsonkinds.summarize({"type": "string", "format": "uuid"}) == "str"
    assert jsonkinds.summarize({"type": "object", "additionalProperties": {
        "type": "boolean"}}) == "dict[str, bool]"
    assert jsonkinds.summarize({"type": "dataframe", "orient": "columns"}) == "DataFrame"
    assert schema_kind({"type": "array", "format": "numpy-array", "dtype": "float32",
                        "shape": [-1, 4]}).summary() == "tensor[float32, shape (-1, 4)]"
