"""`tensorwire.wire.oip.typed`: tensors as typed `InferTensorContents` fields and as
KServe v2 JSON `data`."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

import tensorwire.inference as pb
from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError

from .samples import ALL, TYPED, assert_same, sample

# --- typed contents -------------------------------------------------------------------


@pytest.mark.parametrize("name", TYPED)
def test_contents_round_trip_for_every_typed_datatype(name: str):
    arr = sample(name)
    contents = pb.InferTensorContents()
    dt, shape = oip.contents_from_array(arr, contents)
    assert (dt, shape) == (name, [2, 3])
    wire = pb.InferTensorContents.FromString(contents.SerializeToString())
    assert_same(oip.array_from_contents(wire, dt, shape, "c"), arr)


@pytest.mark.parametrize("name", ["FP16", "BF16"])
def test_half_floats_have_no_typed_field(name: str):
    with pytest.raises(TypeError, match=f"{name} has no typed contents field"):
        oip.contents_from_array(sample(name), pb.InferTensorContents())
    with pytest.raises(OIPError, match=f"input 'h': {name} has no typed contents field"):
        oip.array_from_contents(pb.InferTensorContents(), name, [0], "h")


def test_contents_refuse_wrong_counts_fields_and_ranges():
    c = pb.InferTensorContents(fp32_contents=[1, 2, 3])
    with pytest.raises(OIPError, match=r"input 'c': fp32_contents has 3 values, but shape "
                                       r"\[2, 2\] needs 4"):
        oip.array_from_contents(c, "FP32", [2, 2], "c")
    c = pb.InferTensorContents(int_contents=[1, 2])
    with pytest.raises(OIPError, match=r"a FP64 tensor carries its values in fp64_contents, "
                                       r"not int_contents"):
        oip.array_from_contents(c, "FP64", [2], "c")
    c = pb.InferTensorContents(int_contents=[1, 200])
    with pytest.raises(OIPError, match=r"int_contents holds values outside INT8's range"):
        oip.array_from_contents(c, "INT8", [2], "c")
    c = pb.InferTensorContents(uint_contents=[70000])
    with pytest.raises(OIPError, match=r"outside UINT16's range \[0, 65535\]"):
        oip.array_from_contents(c, "UINT16", [1], "c")


# --- JSON data ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_json_round_trip_for_every_datatype(name: str):
    arr = sample(name)
    if name == "BYTES":  # JSON carries BYTES as strings: UTF-8 only
        arr = np.array([[b"", b"a", "\u00e9".encode()], [b"x", b"yz", b"0"]], dtype=object)
    dt, shape, data = oip.json_from_array(arr, "j")
    wire = orjson.loads(orjson.dumps({"data": data}))["data"]
    back = oip.array_from_json(wire, dt, shape, "j")
    if name in ("FP16", "BF16", "FP32", "FP64"):
        assert back.dtype == arr.dtype and np.array_equal(back, arr)
    else:
        assert_same(back, arr)


def test_json_data_may_be_nested_or_flat():
    flat = oip.array_from_json([1, 2, 3, 4, 5, 6], "INT32", [2, 3], "j")
    nested = oip.array_from_json([[1, 2, 3], [4, 5, 6]], "INT32", [2, 3], "j")
    assert flat.tolist() == nested.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert oip.array_from_json([[], []], "FP32", [2, 0], "j").shape == (2, 0)
    assert oip.array_from_json([1, 2.5], "FP64", [2], "j").tolist() == [1.0, 2.5]
    assert oip.array_from_json(["a", "\u00e9"], "BYTES", [2], "j").tolist() == [
        b"a", "\u00e9".encode()]


@pytest.mark.parametrize(("data", "datatype", "shape", "match"), [
    ([1, 2, 3], "INT32", [2, 2], r"input 'j': data has 3 elements, but shape \[2, 2\] needs 4"),
    ([True, 1], "INT32", [2], r"INT32 data must be JSON integers"),
    ([1.0, 2], "INT64", [2], r"INT64 data must be JSON integers"),
    (["1"], "FP32", [1], r"FP32 data must be JSON numbers"),
    ([1], "BOOL", [1], r"BOOL data must be JSON booleans"),
    ([1], "BYTES", [1], r"BYTES data must be JSON strings"),
    ([True], "FP32", [1], r"FP32 data must be JSON numbers"),
    ([300], "UINT8", [1], r"data holds 300, outside UINT8's range \[0, 255\]"),
    ([-1], "UINT64", [1], r"data holds -1, outside UINT64's range"),
    ([70000.0], "FP16", [1], r"data holds 70000.0, outside FP16's range"),
    ([1e300], "FP32", [1], r"outside FP32's range"),
    ([10**400], "FP64", [1], r"outside FP64's range"),
    ([[1], 2], "INT32", [2], r"data mixes lists and values at one nesting level"),
    (5, "INT32", [1], r"data must be a list, got int"),
    ([1], "INT32", [-1], r"negative dimension"),
])
def test_json_refuses_bad_data_naming_the_input(data, datatype, shape, match):
    with pytest.raises(OIPError, match=match):
        oip.array_from_json(data, datatype, shape, "j")


def test_json_output_refuses_what_json_cannot_carry():
    with pytest.raises(OIPError, match=r"output 'y': holds NaN or infinity"):
        oip.json_from_array(np.array([1.0, np.nan], np.float32), "y")
    with pytest.raises(OIPError, match=r"output 'y': BYTES elements that are not UTF-8"):
        oip.json_from_array(np.array([b"\xff"], dtype=object), "y")
    assert oip.json_from_array(np.array(["\u00e9"]), "y") == ("BYTES", [1], ["\u00e9"])
