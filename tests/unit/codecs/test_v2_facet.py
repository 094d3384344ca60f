"""The `v2` facet of every codec family: the Open Inference Protocol tensors a value is.

One table says what each annotation becomes in model metadata; the rest decodes
request tensors into what the API's pydantic model validates, and encodes outputs.
"""

from __future__ import annotations

import datetime as dt
import enum
import io
import typing as t
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
import torch
from PIL import Image
from pydantic import BaseModel

import tensorwire
from tensorwire.codecs import FieldError, JsonText, codec_for
from tensorwire.codecs.v2_facet import Tensor, TensorMeta, V2Facet, oip_datatype
from tensorwire.context import Context
from tensorwire.validators import ContentType, DataframeSchema, DType, Shape
from tensorwire.wire import dtypes, oip

JSON = {"content_type": "application/json"}


class Color(enum.Enum):
    red = "red"
    blue = "blue"


class Level(enum.IntEnum):
    low = 1
    high = 2


class Point(BaseModel):
    x: int
    y: int = 0


class Pair(tensorwire.IODescriptor):
    label: str
    scores: t.Annotated[np.ndarray, Shape((-1,)), DType("float32")]
    best: int | None = None


def tensor(name: str, array: t.Any, **parameters: t.Any) -> Tensor:
    return Tensor(name, np.asarray(array) if not isinstance(array, np.ndarray) else array,
                  parameters)


def objects(*items: bytes) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = list(items)
    return out


def png(size: tuple[int, int] = (4, 3)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, "red").save(buf, "PNG")
    return buf.getvalue()


def test_oip_datatype_agrees_with_the_wire_table_for_every_dtype() -> None:
    for spec in dtypes.TABLE:
        got = oip_datatype(spec)
        if spec.kind == "complex":
            assert got is None
        elif spec.is_string:
            assert got == "BYTES"
        elif spec is dtypes.BFLOAT16:
            assert got == oip.DATATYPES["BF16"].name
        else:
            assert got == oip.datatype_of(np.dtype(spec.name)).name
    assert oip_datatype(None) == ""


Frame = t.Annotated[pd.DataFrame, DataframeSchema(
    orient="records", columns=["name", "qty", "price"],
    dtypes={"name": "string", "qty": "int64", "price": "float32"})]

METADATA: list[tuple[t.Any, list[tuple[str, str, tuple[int, ...], dict[str, str]]]]] = [
    (int, [("v", "INT64", (1,), {})]),
    (float, [("v", "FP64", (1,), {})]),
    (bool, [("v", "BOOL", (1,), {})]),
    (t.Literal[1, 2], [("v", "INT64", (1,), {})]),
    (str, [("v", "BYTES", (1,), {})]),
    (bytes, [("v", "BYTES", (1,), {})]),
    (t.Annotated[bytes, ContentType("image/png")], [("v", "BYTES", (1,), {
        "content_type": "image/png"})]),
    (Color, [("v", "BYTES", (1,), {})]),
    (t.Literal["a", "b"], [("v", "BYTES", (1,), {})]),
    (Level, [("v", "BYTES", (1,), JSON)]),
    (dt.datetime, [("v", "BYTES", (1,), {})]),
    (dt.date, [("v", "BYTES", (1,), {})]),
    (list[int], [("v", "INT64", (-1,), {})]),
    (list[float], [("v", "FP64", (-1,), {})]),
    (list[str], [("v", "BYTES", (-1,), {})]),
    (tuple[bool, ...], [("v", "BOOL", (-1,), {})]),
    (list[list[float]], [("v", "BYTES", (1,), JSON)]),
    (list[int | None], [("v", "BYTES", (1,), JSON)]),
    (int | None, [("v", "INT64", (1,), {})]),
    (dict[str, int], [("v", "BYTES", (1,), JSON)]),
    (dict[str, t.Any], [("v", "BYTES", (1,), JSON)]),
    (t.Any, [("v", "BYTES", (1,), JSON)]),
    (Point, [("v", "BYTES", (1,), JSON)]),
    (t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")], [("v", "FP32", (-1, 4), {})]),
    (np.ndarray, [("v", "", (-1,), {})]),
    (np.ndarray[tuple[int], np.dtype[np.uint8]], [("v", "UINT8", (-1,), {})]),
    (t.Annotated[torch.Tensor, Shape((2, 2)), DType("bfloat16")], [("v", "BF16", (2, 2), {})]),
    (t.Annotated[tf.Tensor, Shape((-1,)), DType("string")], [("v", "BYTES", (-1,), {})]),
    (t.Annotated[np.ndarray, Shape(()), DType("int16")], [("v", "INT16", (), {})]),
    (Path, [("v", "BYTES", (1,), {"content_type": "application/octet-stream"})]),
    (t.Annotated[Path, ContentType("audio/mp3")], [("v", "BYTES", (1,), {
        "content_type": "audio/mp3"})]),
    (Image.Image, [("v", "BYTES", (1,), {"content_type": "image/*"})]),
    (list[Image.Image], [("v", "BYTES", (-1,), {"content_type": "image/*"})]),
    (Frame, [("name", "BYTES", (-1,), {}), ("qty", "INT64", (-1,), {}),
             ("price", "FP32", (-1,), {})]),
    (t.Annotated[pd.DataFrame, DataframeSchema(columns=["a"])], [("a", "", (-1,), {})]),
]


@pytest.mark.parametrize(("annotation", "expected"), METADATA,
                         ids=[repr(a)[:60] for a, _ in METADATA])
def test_metadata_of_each_type(annotation: t.Any, expected: list[tuple]) -> None:
    facet = codec_for(annotation).v2
    assert isinstance(facet, V2Facet)
    assert facet.unsupported is None
    assert facet.tensors("v") == [TensorMeta(*e) for e in expected]


def test_types_without_a_form_say_why() -> None:
    complex_tensor = codec_for(t.Annotated[np.ndarray, DType("complex64")]).v2
    assert complex_tensor.unsupported == (
        "complex64 tensors have no Open Inference Protocol datatype")
    frame = codec_for(t.Annotated[pd.DataFrame, DataframeSchema(
        columns=["z"], dtypes={"z": "complex128"})]).v2
    assert "column 'z': complex128" in frame.unsupported

    class WithImage(tensorwire.IODescriptor):
        picture: Image.Image
        note: str

    model = codec_for(WithImage).v2
    assert "files or images" in model.unsupported  # no JSON form as an input
    assert model.output_unsupported is None  # but one output per field is fine


# ---------------------------------------------------------------- decoding


def decode(annotation: t.Any, *tensors: Tensor, ctx: t.Any = None, name: str = "v") -> t.Any:
    facet = codec_for(annotation).v2
    return facet.decode(name, {tensor.name: tensor for tensor in tensors}, ctx)


def test_numbers_take_one_element_of_any_width_or_text() -> None:
    assert decode(int, tensor("v", np.array([7], np.int32))) == 7
    assert decode(float, tensor("v", np.array([[0.5]], np.float32))) == 0.5
    assert decode(bool, tensor("v", np.array([True]))) is True
    assert decode(int, tensor("v", objects(b"12"))) == "12"  # pydantic's lax str -> int
    with pytest.raises(FieldError, match=r"expects one element \(shape \[1\]\), got shape \[2\]"):
        decode(int, tensor("v", np.array([1, 2])))


def test_text_bytes_and_json_elements() -> None:
    assert decode(str, tensor("v", objects("héllo".encode()))) == "héllo"
    with pytest.raises(FieldError, match="not UTF-8"):
        decode(str, tensor("v", objects(b"\xff\xfe")))
    assert decode(bytes, tensor("v", objects(b"\x00\x01"))) == b"\x00\x01"
    with pytest.raises(FieldError, match="expects BYTES"):
        decode(bytes, tensor("v", np.array([1], np.uint8)))
    assert decode(Point, tensor("v", objects(b'{"x": 1}'))) == JsonText(b'{"x": 1}')
    assert decode(Color, tensor("v", objects(b"red"))) == "red"


def test_lists_are_rank_one_tensors_and_errors_name_the_item() -> None:
    assert decode(list[float], tensor("v", np.array([1.0, 2.5]))) == [1.0, 2.5]
    assert decode(list[str], tensor("v", objects(b"a", b"b"))) == ["a", "b"]
    with pytest.raises(FieldError, match=r"shape \[n\], got shape \[1, 2\]"):
        decode(list[int], tensor("v", np.array([[1, 2]])))
    with pytest.raises(FieldError) as info:
        decode(list[str], tensor("v", objects(b"ok", b"\xff")))
    assert info.value.loc == (1,)


def test_tensors_are_the_request_array_itself() -> None:
    array = np.frombuffer(np.arange(8, dtype="<f4").tobytes(), "<f4").reshape(2, 4)
    got = decode(t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")],
                 tensor("v", array))
    assert got is array  # no copy: pydantic checks dtype and shape next
    strings = decode(t.Annotated[np.ndarray, DType("string")],
                     tensor("v", objects(b"a", "ü".encode())))
    assert strings.dtype.kind == "U" and strings.tolist() == ["a", "ü"]
    with pytest.raises(FieldError, match="expected dtype float32, got BYTES"):
        decode(t.Annotated[np.ndarray, DType("float32")], tensor("v", objects(b"1")))


def test_files_land_in_the_request_temp_dir_checked_by_their_bytes(ctx: Context) -> None:
    mp3 = t.Annotated[Path, ContentType("image/png")]
    path = decode(mp3, tensor("v", objects(png())), ctx=ctx)
    assert path.parent == ctx.temp_dir and path.suffix == ".png"
    assert ctx.state["uploads"][path].media_type == "image/png"
    with pytest.raises(FieldError) as info:
        decode(mp3, tensor("v", objects(b"%PDF-1.7 not an image"), content_type="image/png"),
               ctx=ctx)
    assert info.value.type == "content_type"


def test_images_are_decoded_as_a_raw_body_is(ctx: Context) -> None:
    image = decode(Image.Image, tensor("v", objects(png((5, 2)))), ctx=ctx)
    assert image.size == (5, 2)
    with pytest.raises(FieldError, match="not an image"):
        decode(Image.Image, tensor("v", objects(b"plain text")), ctx=ctx)
    images = decode(list[Image.Image], tensor("v", objects(png(), png((1, 1)))), ctx=ctx)
    assert [i.size for i in images] == [(4, 3), (1, 1)]


def test_frames_read_one_tensor_per_column() -> None:
    facet = codec_for(Frame).v2
    assert facet.input_names("df") == ("name", "qty", "price")
    frame = facet.decode("df", {"name": tensor("name", objects(b"a", b"b")),
                                "qty": tensor("qty", np.array([[1], [2]])),
                                "price": tensor("price", np.array([0.5, 1.5], np.float32))},
                         None)
    assert frame.to_dict(orient="list") == {"name": ["a", "b"], "qty": [1, 2],
                                            "price": [0.5, 1.5]}
    with pytest.raises(FieldError, match="ragged columns") as info:
        facet.decode("df", {"name": tensor("name", objects(b"a")),
                            "qty": tensor("qty", np.array([1, 2]))}, None)
    assert info.value.loc == ("qty",)
    loose = codec_for(t.Annotated[pd.DataFrame, DataframeSchema()]).v2
    assert loose.input_names("df") is None  # takes whatever inputs no other field reads


# ---------------------------------------------------------------- encoding


def encoded(annotation: t.Any, value: t.Any) -> list[tuple[str, str, list[int], t.Any, dict]]:
    """(name, datatype, shape, values, parameters) of every output tensor."""
    out = []
    for t_ in codec_for(annotation).v2.encode_outputs(value):
        datatype, shape, _ = oip.raw_from_array(t_.array)
        out.append((t_.name, datatype, shape, t_.array.tolist(), dict(t_.parameters)))
    return out


def test_single_outputs_are_named_result() -> None:
    assert encoded(int, 5) == [("result", "INT64", [1], [5], {})]
    assert encoded(float, 0.25) == [("result", "FP64", [1], [0.25], {})]
    assert encoded(str, "hé") == [("result", "BYTES", [1], ["hé".encode()], {})]
    assert encoded(list[str], ["a", "b"]) == [("result", "BYTES", [2], [b"a", b"b"], {})]
    assert encoded(list[bool], []) == [("result", "BOOL", [0], [], {})]
    assert encoded(Color, Color.blue) == [("result", "BYTES", [1], [b"blue"], {})]
    assert encoded(dt.date, dt.date(2024, 5, 1)) == [
        ("result", "BYTES", [1], [b"2024-05-01"], {})]
    assert encoded(list[list[int]], [[1], [2, 3]]) == [
        ("result", "BYTES", [1], [b"[[1],[2,3]]"], JSON)]
    assert encoded(int | None, None) == []


def test_tensors_keep_their_dtype_and_shape() -> None:
    out = encoded(t.Annotated[torch.Tensor, DType("float16")],
                  torch.ones(2, 3, dtype=torch.float16))
    assert out == [("result", "FP16", [2, 3], [[1.0] * 3] * 2, {})]
    (only,) = encoded(t.Annotated[tf.Tensor, DType("string")], tf.constant(["x", "ÿ"]))
    assert only[:3] == ("result", "BYTES", [2])


def test_models_and_dicts_give_one_output_per_field_or_key() -> None:
    pair = Pair(label="q", scores=np.array([0.5, 1.0], np.float32))
    assert encoded(Pair, pair) == [
        ("label", "BYTES", [1], [b"q"], {}),
        ("scores", "FP32", [2], [0.5, 1.0], {}),
    ]  # best is None: left out
    assert [m.name for m in codec_for(Pair).v2.output_tensors()] == ["label", "scores", "best"]
    assert encoded(dict[str, int], {"a": 1, "b": 2}) == [
        ("a", "INT64", [1], [1], {}), ("b", "INT64", [1], [2], {})]
    assert encoded(dict[str, t.Any], {"w": 28, "m": "L"}) == [
        ("w", "BYTES", [1], [b"28"], JSON), ("m", "BYTES", [1], [b'"L"'], JSON)]
    assert codec_for(dict[str, int]).v2.output_tensors() == []


def test_binary_outputs_carry_their_media_type(tmp_path: Path) -> None:
    image = Image.open(io.BytesIO(png()))
    ((name, datatype, shape, values, params),) = encoded(Image.Image, image)
    assert (name, datatype, shape, params) == ("result", "BYTES", [1],
                                               {"content_type": "image/png"})
    assert Image.open(io.BytesIO(values[0])).size == (4, 3)
    wav = tmp_path / "a.wav"
    wav.write_bytes(b"RIFF....WAVEfmt ")
    assert encoded(t.Annotated[Path, ContentType("audio/wav")], wav) == [
        ("result", "BYTES", [1], [wav.read_bytes()], {"content_type": "audio/wav"})]
    declared = t.Annotated[bytes, ContentType("image/png")]
    assert encoded(declared, png())[0][4] == {"content_type": "image/png"}


def test_frames_give_one_output_per_column() -> None:
    frame = pd.DataFrame({"name": ["a", "b"], "qty": [1, 2], "price": [0.5, 1.5]})
    out = encoded(t.Annotated[pd.DataFrame, DataframeSchema()], frame)
    assert out == [("name", "BYTES", [2], ["a", "b"], {}),
                   ("qty", "INT64", [2], [1, 2], {}),
                   ("price", "FP64", [2], [0.5, 1.5], {})]


def test_every_codec_of_the_registry_has_a_v2_facet() -> None:
    annotations = [a for a, _ in METADATA] + [
        dt.timedelta, set[int], frozenset[str], dict[int, str], tuple[int, str],
        t.Annotated[Point | None, "x"], list[Path], list[Point], dict[str, Point],
    ]
    for annotation in annotations:
        assert isinstance(codec_for(annotation).v2, V2Facet), annotation
