"""The tensor codec: one Shape/DType rule over JSON, protobuf and .npy, for each framework."""

from __future__ import annotations

import io
import math
import typing as t

import numpy as np
import pytest
import torch
from pydantic import BaseModel, TypeAdapter, ValidationError

import tensorwire
from tensorwire import v1
from tensorwire.codecs import REPLY, FieldError, codec_for, pydantic_annotation
from tensorwire.codecs.tensor import TensorCodec
from tensorwire.validators import ContentType, DataframeSchema, DType, Shape
from tensorwire.wire import npy

Rows = t.Annotated[np.ndarray, Shape((-1, 4)), DType("float32")]


def adapter(annotation: t.Any) -> TypeAdapter[t.Any]:
    return TypeAdapter(codec_for(annotation).annotation)


def error_of(exc: pytest.ExceptionInfo[ValidationError]) -> tuple[str, str]:
    (err,) = exc.value.errors()
    return err["type"], err["msg"]


# ---------------------------------------------------------------------- definition


def test_families_match_without_importing_and_build_tensor_codecs() -> None:
    for tp in (np.ndarray, torch.Tensor, np.ndarray[tuple[int], np.dtype[np.float16]]):
        assert isinstance(codec_for(tp), TensorCodec)
    assert codec_for(Rows).spec.shape == Shape((-1, 4))
    assert codec_for(Rows).spec.dtype.name == "float32"


def test_typed_numpy_annotation_declares_rank_and_dtype() -> None:
    codec = codec_for(np.ndarray[tuple[int, int], np.dtype[np.float16]])
    assert codec.spec.shape == Shape((-1, -1))
    assert codec.spec.dtype.name == "float16"
    literal = codec_for(np.ndarray[tuple[t.Literal[3]], np.dtype[np.int8]])
    assert literal.spec.shape == Shape((3,))
    anyrank = codec_for(np.ndarray[tuple[int, ...], np.dtype[t.Any]])
    assert anyrank.spec.shape is None and anyrank.spec.dtype is None


@pytest.mark.parametrize(("annotation", "match"), [
    (t.Annotated[np.ndarray, DType("float33")], "unknown dtype"),
    (t.Annotated[np.ndarray, DType("object")], "unknown dtype"),
    (t.Annotated[np.ndarray, ContentType("image/*")], "ContentType does not apply"),
    (t.Annotated[np.ndarray, DataframeSchema()], "DataframeSchema does not apply"),
    (t.Annotated[torch.Tensor, DType("string")], "cannot hold string"),
    (t.Annotated[np.ndarray[tuple[int], np.dtype[np.float16]], Shape((2, 2))], "rank"),
    (t.Annotated[np.ndarray[tuple[int], np.dtype[np.float16]], DType("float32")], "disagrees"),
    (np.ndarray[tuple[int], np.dtype[np.floating]], "not a concrete"),
])
def test_definition_errors_are_type_errors(annotation: t.Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        codec_for(annotation)


def test_bad_annotation_fails_when_the_class_is_decorated() -> None:
    with pytest.raises(TypeError, match=r"Bad.f\(\), parameter 'x'.*unknown dtype"):
        @tensorwire.service
        class Bad:
            @tensorwire.api
            def f(self, x: t.Annotated[np.ndarray, DType("float33")]) -> int:
                return 0


# ---------------------------------------------------------------------- JSON


def test_json_nested_lists_and_rank_zero_scalars() -> None:
    out = adapter(Rows).validate_json(b"[[1, 2, 3, 4.5]]")
    assert out.dtype == np.float32 and out.shape == (1, 4)
    scalar = adapter(t.Annotated[np.ndarray, Shape(()), DType("int16")]).validate_json(b"7")
    assert scalar.shape == () and scalar.dtype == np.int16 and scalar == 7


@pytest.mark.parametrize(("body", "kind", "msg"), [
    (b"[[1, 2, 3]]", "tensor_shape", "expected shape (*, 4), got (1, 3)"),
    (b"[1, 2, 3, 4]", "tensor_shape", "expected rank 2 (shape (*, 4)), got rank 1 (shape (4,))"),
    (b"[[1, 2, 3, 4], [1, 2]]", "tensor_ragged", "[1] has 2 elements where [0] has 4"),
    (b"[[1, 2, 3, 4], 5]", "tensor_ragged", "[1] is a number where [0] is a list"),
    (b'[["a", 2, 3, 4]]', "tensor_dtype", "'a' is not a number"),
    (b"[[1e300, 2, 3, 4]]", "tensor_value", "out of range for float32"),
    (b"[[null, 1, 2, 3]]", "tensor_value", "null is not a tensor element"),
    (b'[[{"a": 1}, 1, 2, 3]]', "tensor_value", "objects are not tensor elements"),
])
def test_json_rejections_name_the_problem(body: bytes, kind: str, msg: str) -> None:
    with pytest.raises(ValidationError) as exc:
        adapter(Rows).validate_json(body)
    got_kind, got_msg = error_of(exc)
    assert got_kind == kind
    assert msg in got_msg


@pytest.mark.parametrize(("dtype", "body", "msg"), [
    ("int8", b"[1, 2.5]", "whole numbers"),
    ("uint8", b"[1, 256]", "out of range for uint8"),
    ("uint8", b"[-1]", "out of range for uint8"),
    ("int64", b"[1, NaN]", "whole numbers"),
    ("bool", b"[1, 2]", "expected bool elements, got integers"),
    ("bool", b"[0.0, 1.0]", "expected bool elements, got numbers"),
    ("float16", b"[70000]", "out of range for float16"),
    ("string", b'["a", 1]', "one kind"),
    ("complex64", b"[1, 2, 3]", "[real, imag] pairs"),
])
def test_json_values_must_fit_the_declared_dtype(dtype: str, body: bytes, msg: str) -> None:
    with pytest.raises(ValidationError) as exc:
        adapter(t.Annotated[np.ndarray, DType(dtype)]).validate_json(body)
    assert msg in error_of(exc)[1]


def test_json_integral_floats_and_large_unsigned_ints_are_exact() -> None:
    out = adapter(t.Annotated[np.ndarray, DType("int32")]).validate_json(b"[1.0, -2]")
    assert out.dtype == np.int32 and out.tolist() == [1, -2]
    big = adapter(t.Annotated[np.ndarray, DType("uint64")]).validate_json(
        b"[18446744073709551615]")
    assert big.dtype == np.uint64 and int(big[0]) == 2**64 - 1
    # NumPy alone would infer float64 here and lose the low bit.
    mixed = adapter(t.Annotated[np.ndarray, DType("uint64")]).validate_json(
        b"[9223372036854775809, 0]")
    assert mixed.tolist() == [2**63 + 1, 0]


def test_json_booleans_and_numbers_read_like_pydantic_lax_mode() -> None:
    assert adapter(t.Annotated[np.ndarray, DType("float32")]).validate_json(
        b"[true, 2]").tolist() == [1.0, 2.0]
    assert adapter(t.Annotated[np.ndarray, DType("bool")]).validate_json(
        b"[1, 0, true]").tolist() == [True, False, True]


def test_json_nonfinite_floats_as_strings_or_tokens() -> None:
    codec = codec_for(t.Annotated[np.ndarray, DType("float32")])
    ta = TypeAdapter(codec.annotation)
    out = ta.validate_json(b'[1.5, "NaN", "Infinity", "-Infinity", NaN, -Infinity]')
    assert out.dtype == np.float32
    assert math.isnan(out[1]) and out[2] == np.inf and out[3] == -np.inf
    assert math.isnan(out[4]) and out[5] == -np.inf
    dumped = ta.dump_json(np.array([np.nan, np.inf, -np.inf, -0.0], np.float32))
    assert dumped == b'["NaN","Infinity","-Infinity",-0.0]'
    with pytest.raises(ValidationError, match=r"'1\.5' is not a number"):
        ta.validate_json(b'["1.5", "NaN"]')


def test_json_bfloat16_nonfinite_values_without_numpy_warnings() -> None:
    """NumPy warns on a signalling NaN of ml_dtypes' bfloat16 (bits 0x7f81) when asked
    whether it is finite; a reply holding one is written as JSON all the same, with no
    warning in the server's log."""
    import warnings

    import ml_dtypes

    from tensorwire.codecs import jsonarray

    values = np.array([0x7F81, 0x7F80, 0x3FC0], np.uint16).view(ml_dtypes.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jsonarray.dumps(values) is None  # not finite: written value by value
    ta = adapter(t.Annotated[np.ndarray, DType("bfloat16")])
    assert ta.dump_json(values) == b'["NaN","Infinity",1.5]'


def test_json_complex_is_real_imag_pairs() -> None:
    ta = adapter(t.Annotated[np.ndarray, DType("complex64")])
    value = np.array([[1 + 2j, -3.5j]], np.complex64)
    text = ta.dump_json(value)
    assert text == b"[[[1.0,2.0],[0.0,-3.5]]]" or text == b"[[[1.0,2.0],[-0.0,-3.5]]]"
    back = ta.validate_json(text)
    assert back.dtype == np.complex64 and back.shape == (1, 2)
    np.testing.assert_array_equal(back, value)


def test_json_strings_and_bools_without_declared_dtype() -> None:
    ta = adapter(np.ndarray)
    assert ta.validate_json(b'["a", "bc"]').dtype.kind == "U"
    assert ta.validate_json(b"[true, false]").dtype == np.bool_
    assert ta.validate_json(b"[1, 2]").dtype == np.int64
    assert ta.validate_json(b"[1, 2.5]").dtype == np.float64
    with pytest.raises(ValidationError, match="one kind"):
        ta.validate_json(b'[1, "a"]')


def test_empty_json_array_takes_the_declared_inner_dims() -> None:
    out = adapter(Rows).validate_json(b"[]")
    assert out.shape == (0, 4) and out.dtype == np.float32


def test_json_schema_says_array_format_dtype_and_shape() -> None:
    schema = adapter(t.Annotated[torch.Tensor, Shape((1, 4)), DType("float32")]).json_schema()
    assert schema["type"] == "array"
    assert schema["format"] == "torch-tensor"
    assert schema["dtype"] == "float32"
    assert schema["shape"] == [1, 4]
    assert schema["minItems"] == schema["maxItems"] == 1
    assert schema["items"]["minItems"] == 4
    assert schema["examples"] == [[[0.0, 0.0, 0.0, 0.0]]]  # zeros of the declared shape
    plain = adapter(np.ndarray).json_schema()
    assert plain == {"type": "array", "format": "numpy-array", "examples": [[0.0]]}


# ---------------------------------------------------------------------- Python mode


def test_python_mode_checks_arrays_strictly_and_keeps_them() -> None:
    ta = adapter(Rows)
    array = np.zeros((2, 4), np.float32)
    assert ta.validate_python(array) is array
    with pytest.raises(ValidationError) as exc:
        ta.validate_python(np.zeros((2, 4), np.float64))
    assert error_of(exc) == ("tensor_dtype", "expected dtype float32, got float64")
    with pytest.raises(ValidationError, match=r"object arrays|not supported"):
        ta.validate_python(np.array([[1, "a", None, 2]], dtype=object))
    with pytest.raises(ValidationError, match="expected a NumPy array"):
        ta.validate_python(object())


def test_torch_tensor_checked_in_place_and_numpy_converted() -> None:
    ta = adapter(t.Annotated[torch.Tensor, Shape((1, 4)), DType("float32")])
    tensor = torch.zeros(1, 4)
    assert ta.validate_python(tensor) is tensor
    converted = ta.validate_python(np.ones((1, 4), np.float32))
    assert isinstance(converted, torch.Tensor) and converted.dtype == torch.float32
    with pytest.raises(ValidationError, match="expected dtype float32, got float16"):
        ta.validate_python(torch.zeros(1, 4, dtype=torch.float16))
    with pytest.raises(ValidationError, match="expected shape"):
        ta.validate_python(torch.zeros(2, 4))


@pytest.mark.parametrize("make", [
    lambda: torch.tensor([1.5, -2.0]),
    lambda: torch.tensor([1.5, -2.0], requires_grad=True) * 1,  # part of a graph
    lambda: torch._neg_view(torch.tensor([-1.5, 2.0])),  # the negative bit set
    lambda: torch.tensor([1.5 - 1j, -2.0 + 0j]).conj(),  # the conjugate bit set
    lambda: torch.tensor([1.5, -2.0]).to(torch.bfloat16),
], ids=["plain", "grad", "neg-bit", "conj-bit", "bfloat16"])
def test_every_torch_output_answers_its_values(make: t.Any) -> None:
    """A plain CPU tensor converts in one call; torch refuses the others that way, and
    they take the long road (detach, resolve the bits, bfloat16 by its bits)."""
    tensor = make()
    codec = codec_for(torch.Tensor)
    array = codec.to_numpy(tensor)
    want = tensor.detach().resolve_conj().resolve_neg()
    if want.dtype == torch.bfloat16:
        want = want.float()
        array = array.astype(np.float32)
    np.testing.assert_array_equal(array, want.numpy())


@pytest.mark.parametrize(("dtype", "values", "ok"), [
    ("float16", [1.0, 65504.0], True), ("float16", [1.0, 70000.0], False),
    ("float32", [1.0, 1e39], False), ("float32", ["NaN", "Infinity", 1.0], True),
    ("bfloat16", [1.0, 1e39], False), ("float64", [1e308, "-Infinity"], True),
])
def test_a_json_float_beyond_the_dtype_is_refused_never_made_infinite(
        dtype: str, values: list[t.Any], ok: bool) -> None:
    ta = adapter(t.Annotated[np.ndarray, DType(dtype)])
    if ok:
        out = ta.validate_python(values)
        assert str(out.dtype) == dtype and out.shape == (len(values),)
    else:
        with pytest.raises(ValidationError, match=f"out of range for {dtype}"):
            ta.validate_python(values)


def test_read_only_arrays_become_writable_torch_tensors() -> None:
    ta = adapter(t.Annotated[torch.Tensor, DType("bfloat16")])
    wire = np.frombuffer(np.array([1.0, 2.0], np.float32).astype(
        __import__("ml_dtypes").bfloat16).tobytes(), dtype=__import__("ml_dtypes").bfloat16)
    assert not wire.flags.writeable
    out = ta.validate_python(wire)
    assert out.dtype == torch.bfloat16 and out.tolist() == [1.0, 2.0]
    out += 1  # writable


def test_tensors_inside_an_iodescriptor() -> None:
    class Features(tensorwire.IODescriptor):
        x: t.Annotated[np.ndarray, Shape((-1,)), DType("float16")]
        name: str

    item = Features.model_validate_json(b'{"x": [1, 2.5], "name": "a"}')
    assert item.x.dtype == np.float16
    assert item.model_dump_json() == '{"x":[1.0,2.5],"name":"a"}'
    with pytest.raises(ValidationError) as exc:
        Features(x=np.zeros(2, np.float32), name="a")
    assert exc.value.errors()[0]["loc"] == ("x",)


def test_pydantic_annotation_keeps_tensors_usable_in_plain_models() -> None:
    class Plain(BaseModel):
        x: pydantic_annotation(Rows)  # type: ignore[valid-type]

    assert Plain(x=[[1, 2, 3, 4]]).x.dtype == np.float32


# ---------------------------------------------------------------------- protobuf


def tensor_msg(dtype: int, shape: list[int], data: bytes = b"",
               strings: list[str] | None = None) -> t.Any:
    msg = v1.Tensor(dtype=dtype, data=data)
    msg.shape.extend(shape)
    msg.strings.extend(strings or [])
    return msg


F32 = v1.DType.values_by_name["FLOAT32"].number
STR = v1.DType.values_by_name["STRING"].number
BOOL = v1.DType.values_by_name["BOOL"].number


def test_proto_round_trip_is_a_read_only_view_of_the_bytes() -> None:
    codec = codec_for(Rows)
    msg = v1.Tensor()
    value = np.arange(8, dtype=np.float32).reshape(2, 4)
    codec.proto.fill(value, msg)
    assert msg.dtype == F32 and list(msg.shape) == [2, 4] and len(msg.data) == 32
    back = codec.proto.from_proto(v1.Tensor.FromString(msg.SerializeToString()), REPLY)
    assert not back.flags.writeable  # frombuffer over the received field: no extra copy
    np.testing.assert_array_equal(back, value)


@pytest.mark.parametrize(("msg", "kind", "match"), [
    (tensor_msg(F32, [2, 4], b"\0" * 31), "tensor_size", "needs 32 bytes, data has 31"),
    (tensor_msg(F32, [2, 4], b"\0" * 33), "tensor_size", "needs 32 bytes, data has 33"),
    (tensor_msg(F32, [-1, 4], b""), "tensor_shape", "negative dimension"),
    (tensor_msg(F32, [2**40, 2**40], b"\0" * 4), "tensor_size", "data has 4"),
    (tensor_msg(F32, [1] * 65, b"\0" * 4), "tensor_shape", "rank 65"),
    (tensor_msg(0, [1], b"\0" * 4), "tensor_dtype", "dtype is not set"),
    (tensor_msg(99, [1], b"\0" * 4), "tensor_dtype", "unknown dtype number 99"),
    (tensor_msg(STR, [2], b"ab", ["a", "b"]), "tensor_value", "in `strings`"),
    (tensor_msg(STR, [3], b"", ["a", "b"]), "tensor_size", "needs 3 strings"),
    (tensor_msg(F32, [1], b"\0" * 4, ["a"]), "tensor_value", "in `data`"),
    (tensor_msg(BOOL, [2], b"\x01\x02"), "tensor_value", "0 or 1"),
])
def test_proto_integrity_is_checked_before_any_array_is_made(msg: t.Any, kind: str,
                                                             match: str) -> None:
    with pytest.raises(FieldError, match=match.replace("[", r"\[").replace("(", r"\(")) as exc:
        codec_for(np.ndarray).proto.from_proto(msg, REPLY)
    assert exc.value.type == kind


def test_proto_zero_size_and_string_tensors() -> None:
    codec = codec_for(np.ndarray)
    empty = codec.proto.from_proto(tensor_msg(F32, [0, 4]), REPLY)
    assert empty.shape == (0, 4) and empty.dtype == np.float32
    words = codec.proto.from_proto(tensor_msg(STR, [2, 1], strings=["é", "b"]), REPLY)
    assert words.dtype.kind == "U" and words.tolist() == [["é"], ["b"]]


def test_outputs_are_held_to_their_declaration() -> None:
    codec = codec_for(Rows)
    with pytest.raises(FieldError, match="expected dtype float32, got float64"):
        codec.proto.fill(np.zeros((1, 4)), v1.Tensor())
    with pytest.raises(FieldError, match="expected shape"):
        codec.http.encode(np.zeros((1, 3), np.float32), None)


# ---------------------------------------------------------------------- .npy


def np_save(array: np.ndarray, **kw: t.Any) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("array", [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
    np.arange(6, dtype=">f8").reshape(2, 3),
    np.array(3.5),
    np.zeros((0, 3), np.uint8),
    np.array(["a", "héllo"]),
    np.array([True, False]),
])
def test_npy_from_numpy_save_reads_back_exactly(array: np.ndarray) -> None:
    out = npy.read(np_save(array))
    np.testing.assert_array_equal(out, array)
    assert out.shape == array.shape
    assert out.dtype == array.dtype.newbyteorder("<") or out.dtype == array.dtype


def test_npy_written_by_us_loads_with_numpy_allow_pickle_false() -> None:
    import ml_dtypes

    for array in (np.arange(6, dtype=np.float32).reshape(2, 3),
                  np.array([1.5, -2], ml_dtypes.bfloat16)):
        data = npy.write(array)
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
        assert loaded.dtype == array.dtype
        np.testing.assert_array_equal(loaded, array)
        np.testing.assert_array_equal(npy.read(data), array)


@pytest.mark.parametrize(("data", "match"), [
    (np_save(np.array([1, "a"], dtype=object), allow_pickle=True), "object arrays are refused"),
    (np_save(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])), "not a tensor dtype"),
    (np_save(np.array([b"ab"])), "not a tensor dtype"),
    (np_save(np.zeros((2, 4), np.float32))[:-1], r"says shape \[2, 4\] of <f4 \(32 bytes\) but 31"),
    (np_save(np.zeros((2, 4), np.float32)) + b"\0", "but 33 bytes follow"),
    (np_save(np.zeros((2, 4), np.float32)).replace(b"(2, 4)", b"(9, 4)"), "144 bytes"),
    (np_save(np.zeros((2, 4), np.float32)).replace(b"(2, 4)", b"(-2, 4)"), "negative"),
    (b"PK\x03\x04 not npy at all", "not a NumPy .npy file"),
    (b"\x93NUMPY\x01\x00\x08\x00{'descr'", "malformed .npy header"),
    (b"\x93NUMPY\x03\x00" + b"\0" * 20, "malformed .npy header"),
    (np_save(np.array(["ab"], "<U2")).replace("b".encode("utf-32-le"),
                                              b"\x00\xd8\x00\x00"), "Unicode text"),
    (np_save(np.array(["ab"], ">U2")).replace("b".encode("utf-32-be"),
                                              b"\x00\x11\x00\x00"), "Unicode text"),
])
def test_npy_rejections(data: bytes, match: str) -> None:
    with pytest.raises(FieldError, match=match):
        npy.read(data)


@pytest.mark.parametrize(("accept", "wanted"), [
    (None, False), ("application/json", False), ("*/*", False),
    ("application/x-npy", True), ("application/x-npy, application/json", True),
    ("application/json, application/x-npy", False),
    ("application/json;q=0.5, application/x-npy", True),
    ("application/x-npy;q=0", False), ("*/*, application/x-npy", True),
    ("application/x-npy;q=0.2, */*;q=0.9", False),
])
def test_accept_negotiation(accept: str | None, wanted: bool) -> None:
    assert npy.wants(accept) is wanted


def test_encode_http_follows_accept() -> None:
    codec = codec_for(np.ndarray)
    value = np.arange(3, dtype=np.int32)
    as_npy = codec.http.encode(value, "application/x-npy")
    assert as_npy.media_type == "application/x-npy"
    np.testing.assert_array_equal(np.load(io.BytesIO(as_npy.content)), value)
    as_json = codec.http.encode(value, "application/json")
    assert as_json.media_type == "application/json" and as_json.content == b"[0,1,2]"


def test_iter_tensors_finds_no_device_tensors_on_cpu() -> None:
    assert codec_for(torch.Tensor).iter_tensors(torch.zeros(2)) == []
    assert codec_for(np.ndarray).iter_tensors(np.zeros(2)) == []
