"""`tensorwire.wire.oip`: Open Inference Protocol tensors, checked against tritonclient.

tritonclient's own code builds the requests and reads the responses wherever it can do
so without a server, so "compatible" means compatible with the reference client, not
with our reading of the spec.
"""

from __future__ import annotations

import ast
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

import ml_dtypes
import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tensorwire.inference as pb
from tensorwire.errors import InvalidArgument
from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError

tritonclient_utils = pytest.importorskip("tritonclient.utils")
thttp = pytest.importorskip("tritonclient.http")
tgrpc = pytest.importorskip("tritonclient.grpc")
from tritonclient.grpc import _utils as tgrpc_utils  # noqa: E402
from tritonclient.grpc import service_pb2 as triton_pb2  # noqa: E402

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
           "FP16", "BF16", "FP32", "FP64"]
ALL = [*NUMERIC, "BYTES"]
TYPED = [d for d in ALL if d not in ("FP16", "BF16")]


@dataclass(frozen=True)
class RawSpec:
    """A raw body's one input (`oip.RawInput`), as a model's metadata would give it."""

    name: str
    datatype: str
    shape: tuple[int, ...] | None = None


def sample(datatype: str, shape: tuple[int, ...] = (2, 3), seed: int = 0) -> np.ndarray:
    """A deterministic array of `datatype` with the extremes of its range in it."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if datatype == "BYTES":
        items = [b"", b"a\x00b", "caf\u00e9".encode(), b"\xff\xfe", b"x" * 300, b"z"]
        out = np.empty(n, dtype=object)
        out[:] = [items[i % len(items)] for i in range(n)]
        return out.reshape(shape)
    if datatype == "BOOL":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    dtype = oip.DATATYPES[datatype].numpy_dtype()
    if oip.DATATYPES[datatype].kind in ("int", "uint"):
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        values.flat[0], values.flat[-1] = info.min, info.max
        return values.reshape(shape)
    return (rng.standard_normal(n) * 100).astype(dtype).reshape(shape)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    if want.dtype == object:
        assert got.dtype == object
        assert got.tolist() == want.tolist()
    else:
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()


# --- the datatype table ---------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_the_table_agrees_with_tritonclient(name: str):
    dt = oip.DATATYPES[name]
    assert np.dtype(tritonclient_utils.triton_to_np_dtype(name)) == dt.numpy_dtype()
    assert tritonclient_utils.np_to_triton_dtype(dt.numpy_dtype()) == name
    if name != "BYTES":
        assert dt.numpy_dtype().itemsize == dt.itemsize
    assert oip.datatype_of(dt.numpy_dtype()) is dt


def test_typed_fields_follow_the_reference_table():
    fields = {d.name: d.contents_field for d in oip.DATATYPES.values()}
    assert fields == {
        "BOOL": "bool_contents", "UINT8": "uint_contents", "UINT16": "uint_contents",
        "UINT32": "uint_contents", "UINT64": "uint64_contents", "INT8": "int_contents",
        "INT16": "int_contents", "INT32": "int_contents", "INT64": "int64_contents",
        "FP16": None, "BF16": None, "FP32": "fp32_contents", "FP64": "fp64_contents",
        "BYTES": "bytes_contents"}
    assert set(oip.CONTENTS_FIELDS) == {f.name for f in pb.InferTensorContents.DESCRIPTOR.fields}


def test_str_and_bytes_arrays_travel_as_bytes_and_others_are_refused():
    assert oip.datatype_of(np.dtype("<U3")) is oip.BYTES
    assert oip.datatype_of(np.dtype("S3")) is oip.BYTES
    assert oip.datatype_of(np.dtype(">f4")).name == "FP32"
    for bad in ("complex64", "datetime64[s]", "V4", "float128" if hasattr(np, "float128")
                else "complex128"):
        with pytest.raises(TypeError, match="no Open Inference Protocol datatype"):
            oip.datatype_of(np.dtype(bad))


def test_unknown_datatype_names_the_input():
    with pytest.raises(OIPError, match=r"input 'x': unknown datatype 'FP8'"):
        oip.array_from_raw(b"", "FP8", [0], "x")


def test_the_error_is_an_invalid_argument_with_a_location():
    with pytest.raises(InvalidArgument) as info:
        oip.array_from_raw(b"\x00" * 3, "FP32", [1], "img")
    err = info.value
    assert isinstance(err, OIPError)
    assert (err.http_status, err.grpc_code) == (400, "INVALID_ARGUMENT")
    assert err.detail[0]["loc"] == ["inputs", "img"]
    assert err.to_dict()["error"].startswith("input 'img': has 3 bytes")


# --- raw bytes ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_raw_round_trip_for_every_datatype(name: str):
    arr = sample(name)
    dt, shape, data = oip.raw_from_array(arr)
    assert (dt, shape) == (name, [2, 3])
    back = oip.array_from_raw(data, dt, shape, "t")
    assert_same(back, arr)


@pytest.mark.parametrize("name", NUMERIC)
def test_raw_is_zero_copy_both_ways(name: str):
    arr = sample(name)
    _, _, data = oip.raw_from_array(arr)
    assert isinstance(data, memoryview) and data.nbytes == arr.nbytes
    assert np.shares_memory(np.frombuffer(data, np.uint8), arr)
    body = bytearray(b"\x07" * 5) + bytes(data)
    view = memoryview(body)[5:]
    back = oip.array_from_raw(view, name, [2, 3], "t")
    assert np.shares_memory(back, np.frombuffer(body, np.uint8))


def test_raw_bytes_are_little_endian_whatever_the_array():
    big = np.arange(4, dtype=">i4")
    _, _, data = oip.raw_from_array(big)
    assert bytes(data) == np.arange(4, dtype="<i4").tobytes()
    strided = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::2]
    _, shape, data = oip.raw_from_array(strided)
    assert shape == [3, 2] and bytes(data) == np.ascontiguousarray(strided).tobytes()


def test_zero_dim_and_empty_arrays():
    dt, shape, data = oip.raw_from_array(np.float32(2.5))
    assert (dt, shape) == ("FP32", [])
    assert oip.array_from_raw(data, dt, shape, "s").tolist() == 2.5
    dt, shape, data = oip.raw_from_array(np.empty((0, 3), np.int64))
    assert (dt, shape, len(data)) == ("INT64", [0, 3], 0)
    assert oip.array_from_raw(data, dt, shape, "e").shape == (0, 3)
    assert oip.array_from_raw(b"", "BYTES", [2, 0], "e").shape == (2, 0)


def test_bytes_framing_matches_tritonclient():
    arr = sample("BYTES", (2, 3))
    _, _, ours = oip.raw_from_array(arr)
    theirs = tritonclient_utils.serialize_byte_tensor(arr).item()
    assert ours == theirs
    assert tritonclient_utils.deserialize_bytes_tensor(ours).tolist() == arr.ravel().tolist()
    assert oip.array_from_raw(theirs, "BYTES", [2, 3], "s").tolist() == arr.tolist()


def test_str_elements_are_encoded_utf8():
    arr = np.array(["h\u00e9", "", "\u4e2d"])
    dt, shape, data = oip.raw_from_array(arr)
    assert dt == "BYTES"
    assert data == tritonclient_utils.serialize_byte_tensor(arr.astype(object)).item()
    assert oip.array_from_raw(data, dt, shape, "s").tolist() == [s.encode() for s in arr]
    with pytest.raises(TypeError, match="must be str or bytes"):
        oip.raw_from_array(np.array([1, b"x"], dtype=object))


def test_bf16_is_what_tritonclient_sends_new_and_old():
    values = np.array([1.0, -2.5, 3.140625, 1e-3, 65280.0], dtype=np.float32)
    bf = values.astype(ml_dtypes.bfloat16)
    # tritonclient since r26.06: ml_dtypes.bfloat16 arrays, sent as their bytes.
    inp = thttp.InferInput("b", [5], "BF16")
    inp.set_data_from_numpy(bf)
    parsed = oip.array_from_raw(inp._get_binary_data(), "BF16", [5], "b")
    assert_same(parsed, bf)
    # Before: float32 arrays truncated to their high two bytes (serialize_bf16_tensor).
    truncated = (values.view("<u4") >> 16).astype("<u2").tobytes()
    parsed = oip.array_from_raw(truncated, "BF16", [5], "b")
    want = (values.view("<u4") & 0xFFFF0000).view("<f4")
    assert parsed.astype(np.float32).tobytes() == want.tobytes()
    # And what we send is the high half of each value's float32, as both read it.
    _, _, data = oip.raw_from_array(bf)
    assert bytes(data) == (bf.astype(np.float32).view("<u4") >> 16).astype("<u2").tobytes()


# --- raw bytes: hostile input ----------------------------------------------------------


@pytest.mark.parametrize(("buf", "datatype", "shape", "match"), [
    (b"\x00" * 15, "FP32", [2, 2], r"input 't': has 15 bytes of data, but shape \[2, 2\] of "
                                   r"FP32 needs 16"),
    (b"\x00" * 4, "FP32", [-1], r"input 't': shape \[-1\] has a negative dimension"),
    (b"", "FP32", [0, 2**62], r"input 't': shape \[0, 4611686018427387904\] is too large"),
    (b"", "FP32", [2**40, 2**40], r"too large"),
    (b"\x00" * 4, "FP32", [1.0], r"shape must be a list of integers"),
    (b"\x00" * 4, "FP32", [True], r"shape must be a list of integers"),
    (b"\x00" * 4, "FP32", "4", r"shape must be a list of integers"),
    (b"", "FP32", [1] * 65 + [0], r"rank 66 exceeds the limit of 64"),
    (b"\x00\x02", "BOOL", [2], r"input 't': BOOL elements must be the bytes 0 or 1"),
    (b"\x00" * 8, "BYTES", [3], r"declares 3 BYTES elements, which need at least 12 bytes, "
                                r"but there are 8"),
    (struct.pack("<I", 5) + b"abc", "BYTES", [1], r"BYTES element 0 is truncated: it claims 5 "
                                                  r"bytes, 3 remain"),
    (struct.pack("<I", 1) + b"a" + b"\x00\x00\x00\x00\x00", "BYTES", [2],
     r"1 bytes follow the 2 BYTES elements of shape \[2\]"),
    (struct.pack("<I", 1) + b"a" + b"\x01\x00", "BYTES", [1], r"2 bytes follow the 1 BYTES "
                                                              r"elements of shape \[1\]"),
    (struct.pack("<I", 0) * 3, "BYTES", [2], r"4 bytes follow the 2 BYTES elements"),
    (struct.pack("<I", 2**32 - 1) + b"ab", "BYTES", [1], r"claims 4294967295 bytes, 2 remain"),
])
def test_raw_refuses_mismatches_with_a_message_naming_the_input(buf, datatype, shape, match):
    with pytest.raises(OIPError, match=match):
        oip.array_from_raw(buf, datatype, shape, "t")


def test_a_huge_claimed_bytes_count_allocates_nothing():
    """A shape claiming 2**40 BYTES elements in a 12-byte buffer fails on arithmetic."""
    with pytest.raises(OIPError, match=r"declares 1099511627776 BYTES elements"):
        oip.array_from_raw(b"\x00" * 12, "BYTES", [2**20, 2**20], "s")


def test_truncated_length_prefix():
    buf = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0) + b"\x00\x00"
    with pytest.raises(OIPError, match=r"input 's': BYTES element 2 is truncated: its 4-byte "
                                       r"length starts at byte 10 of 12"):
        oip.array_from_raw(buf, "BYTES", [3], "s")


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


# --- HTTP: requests built by tritonclient ------------------------------------------------


def _triton_input(name: str, arr: np.ndarray, binary: bool) -> thttp.InferInput:
    dt = "BYTES" if arr.dtype == object else tritonclient_utils.np_to_triton_dtype(arr.dtype)
    inp = thttp.InferInput(name, list(arr.shape), dt)
    inp.set_data_from_numpy(arr, binary_data=binary)
    return inp


def test_parses_a_tritonclient_binary_request_with_every_datatype():
    arrays = {f"in_{n.lower()}": sample(n, (2, 3), seed=i) for i, n in enumerate(ALL)}
    # JSON and binary inputs mix: every other (non-BF16) one goes as JSON.
    as_json = {k for i, k in enumerate(arrays) if i % 2 and k != "in_bf16"}
    arrays["in_bytes"] = np.array([[b"a", b"", b"\x00\xff"], [b"q", b"rs", b"t"]], object)
    as_json.discard("in_bytes")
    inputs = [_triton_input(k, v, k not in as_json) for k, v in arrays.items()]
    outputs = [thttp.InferRequestedOutput("y", binary_data=False),
               thttp.InferRequestedOutput("z")]
    body, header_length = thttp.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="r1", parameters={"temperature": 0.5})
    request = oip.parse_http_infer_request(body, str(header_length))
    assert request.id == "r1" and request.parameters == {"temperature": 0.5}
    assert [i.name for i in request.inputs] == list(arrays)
    assert {i.name for i in request.inputs if not i.binary} == as_json
    got = request.arrays()
    for name, want in arrays.items():
        if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
            assert got[name].dtype == want.dtype and np.array_equal(got[name], want), name
        else:
            assert_same(got[name], want)
    assert (request.wants_binary("y"), request.wants_binary("z")) == (False, True)
    assert not request.wants_binary("unlisted")


def test_binary_inputs_are_views_of_the_body():
    arr = np.arange(6, dtype=np.float32)
    body, n = thttp.InferenceServerClient.generate_request_body([_triton_input("x", arr, True)])
    body = bytearray(body)
    request = oip.parse_http_infer_request(body, n)
    x = request.inputs[0].to_numpy()
    assert np.shares_memory(x, np.frombuffer(body, np.uint8))
    assert x.tolist() == arr.tolist()


def test_no_outputs_listed_means_every_output_binary():
    body, n = thttp.InferenceServerClient.generate_request_body(
        [_triton_input("x", np.zeros(2, np.int8), True)])
    request = oip.parse_http_infer_request(body, n)
    assert request.outputs == () and request.binary_output
    assert request.wants_binary("anything")


def test_a_json_only_request_needs_no_header():
    body, n = thttp.InferenceServerClient.generate_request_body(
        [_triton_input("x", np.array([[1, 2]], np.int64), False)],
        outputs=[thttp.InferRequestedOutput("y", binary_data=False)])
    assert n is None
    request = oip.parse_http_infer_request(body, None)
    assert request.arrays()["x"].tolist() == [[1, 2]]
    assert not request.wants_binary("y")


def _body(header: dict, *blobs: bytes) -> tuple[bytes, int]:
    head = orjson.dumps(header)
    return head + b"".join(blobs), len(head)


def _fp32_input(name: str = "x", size: int = 8, shape: tuple = (2,)) -> dict:
    return {"name": name, "datatype": "FP32", "shape": list(shape),
            "parameters": {"binary_data_size": size}}


@pytest.mark.parametrize(("header_length", "match"), [
    ("-1", r"Inference-Header-Content-Length -1 is negative"),
    ("abc", r"Inference-Header-Content-Length must be an integer, got 'abc'"),
    ("--5", r"must be an integer"),
    ("1" * 30, r"must be an integer"),
    ("100000", r"Inference-Header-Content-Length 100000 exceeds the body's \d+ bytes"),
])
def test_header_length_is_checked_against_the_body(header_length, match):
    body, _ = _body({"inputs": [_fp32_input()]}, b"\x00" * 8)
    with pytest.raises(OIPError, match=match):
        oip.parse_http_infer_request(body, header_length)


def test_binary_sizes_are_checked_against_the_body():
    body, n = _body({"inputs": [_fp32_input("a"), _fp32_input("b")]}, b"\x00" * 12)
    with pytest.raises(OIPError, match=r"input 'b': binary_data_size 8 runs past the end of "
                                       r"the body \(4 bytes remain\)"):
        oip.parse_http_infer_request(body, n)
    body, n = _body({"inputs": [_fp32_input("a")]}, b"\x00" * 9)
    with pytest.raises(OIPError, match=r"1 bytes follow the JSON header and the binary inputs"):
        oip.parse_http_infer_request(body, n)
    body, n = _body({"inputs": [_fp32_input("a", size=12)]}, b"\x00" * 12)
    with pytest.raises(OIPError, match=r"input 'a': binary_data_size 12 does not match shape "
                                       r"\[2\] of FP32 \(8 bytes\)"):
        oip.parse_http_infer_request(body, n)
    body, _ = _body({"inputs": [_fp32_input("a")]}, b"\x00" * 8)
    with pytest.raises(OIPError, match=r"input 'a': binary_data_size needs the "
                                       r"Inference-Header-Content-Length header"):
        oip.parse_http_infer_request(body[:-8], None)


@pytest.mark.parametrize(("header", "match"), [
    ([1], r"the inference request must be a JSON object"),
    ({}, r"needs an 'inputs' list"),
    ({"inputs": [{"datatype": "FP32"}]}, r"inputs\[0\] must be an object with a string name"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]},
     r"input 'x': has neither data nor binary_data_size"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1],
                  "parameters": {"binary_data_size": 4}}]},
     r"input 'x': has both data and binary_data_size"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                  "parameters": {"binary_data_size": -4}}]},
     r"binary_data_size must be a non-negative integer"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                  "parameters": {"binary_data_size": True}}]},
     r"binary_data_size must be a non-negative integer"),
    ({"inputs": [{"name": "x", "datatype": "HALF", "shape": [1], "data": [1]}]},
     r"input 'x': unknown datatype 'HALF'"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-2], "data": [1]}]},
     r"input 'x': shape \[-2\] has a negative dimension"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]},
     r"input 'x': shape must be a list of integers, got None"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}] * 2},
     r"the request names input 'x' twice"),
    ({"inputs": [], "outputs": [{"name": "y"}, {"name": "y"}]},
     r"the request names output 'y' twice"),
    ({"inputs": [], "outputs": [{"name": "y", "parameters": {"binary_data": "yes"}}]},
     r"output 'y': parameter binary_data must be a boolean"),
    ({"inputs": [], "parameters": {"binary_data_output": 1}},
     r"parameter binary_data_output must be a boolean"),
    ({"inputs": [], "parameters": []}, r"parameters must be a JSON object"),
    ({"inputs": [], "id": 5}, r"the request id must be a string"),
])
def test_json_header_structure_is_checked(header, match):
    body = orjson.dumps(header)
    for length in (None, len(body)):
        with pytest.raises(OIPError, match=match):
            oip.parse_http_infer_request(body, length)


def test_invalid_json_is_refused():
    with pytest.raises(OIPError, match=r"the inference request is not valid JSON"):
        oip.parse_http_infer_request(b'{"inputs": [', None)
    body, n = _body({"inputs": [_fp32_input()]}, b"\x00" * 8)
    with pytest.raises(OIPError, match=r"not valid JSON"):
        oip.parse_http_infer_request(body, n - 1)  # the header length cuts the JSON


def test_decoding_a_parsed_input_checks_its_data():
    body = orjson.dumps({"inputs": [{"name": "x", "datatype": "INT8", "shape": [2],
                                     "data": [1, 999]}]})
    request = oip.parse_http_infer_request(body, None)
    with pytest.raises(OIPError, match=r"input 'x': data holds 999"):
        request.arrays()


# --- HTTP: Triton's raw body (header length 0) --------------------------------------------


def test_raw_body_fills_the_one_input():
    data = np.arange(8, dtype=np.float32)
    spec = RawSpec("x", "FP32", (-1, 4))
    request = oip.parse_http_infer_request(data.tobytes(), "0", raw_input=spec)
    assert request.binary_output and request.wants_binary("y")
    assert request.inputs[0].shape == (2, 4)
    assert request.arrays()["x"].tolist() == data.reshape(2, 4).tolist()
    assert request.header["inputs"][0]["parameters"] == {"binary_data_size": 32}
    # A leading -1 beside another variable dim is a batch of one.
    request = oip.parse_http_infer_request(data.tobytes(), 0,
                                           raw_input=RawSpec("x", "FP32", (-1, -1, 2)))
    assert request.inputs[0].shape == (1, 4, 2)
    # No declared shape: one dimension.
    request = oip.parse_http_infer_request(data.tobytes(), 0,
                                           raw_input=RawSpec("x", "FP32"))
    assert request.inputs[0].shape == (8,)


def test_raw_body_of_a_bytes_input_is_one_element():
    request = oip.parse_http_infer_request(b"\x89PNG\x00", 0,
                                           raw_input=RawSpec("img", "BYTES", (-1,)))
    assert request.arrays()["img"].tolist() == [b"\x89PNG\x00"]
    with pytest.raises(OIPError, match=r"input 'img': a raw body fills a BYTES input only when "
                                       r"its shape is \[1\]"):
        oip.parse_http_infer_request(b"x", 0, raw_input=RawSpec("img", "BYTES", (2,)))


def test_raw_body_refusals():
    with pytest.raises(OIPError, match=r"needs a model with exactly one input"):
        oip.parse_http_infer_request(b"\x00" * 4, 0)
    with pytest.raises(OIPError, match=r"input 'x': 10 bytes are not a whole number of FP32 "
                                       r"elements of shape \[-1, 2\]"):
        oip.parse_http_infer_request(b"\x00" * 10, 0, raw_input=RawSpec("x", "FP32",
                                                                               (-1, 2)))
    with pytest.raises(OIPError, match=r"more than one variable dimension"):
        oip.parse_http_infer_request(b"\x00" * 8, 0, raw_input=RawSpec("x", "FP32",
                                                                              (2, -1, -1)))
    with pytest.raises(OIPError, match=r"input 'x': has 8 bytes of data, but shape \[3\]"):
        oip.parse_http_infer_request(b"\x00" * 8, 0, raw_input=RawSpec("x", "FP32",
                                                                              (3,)))


# --- HTTP: responses read by tritonclient --------------------------------------------------


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_reads_our_response_for_every_datatype(binary: bool):
    arrays = {f"out_{n.lower()}": sample(n, (3, 2), seed=i) for i, n in enumerate(ALL)}
    if not binary:
        arrays["out_bytes"] = np.array([[b"a", b""], [b"bc", b"d"], [b"e", b"f"]], object)
    outputs = [oip.ResponseOutput(k, v, binary=binary) for k, v in arrays.items()]
    response = oip.build_http_infer_response(outputs, model_name="m", model_version="1",
                                             id="r7", parameters={"p": 1})
    assert response.content_length == len(response.body())
    if binary:
        assert response.header_length == len(response.chunks[0])
        assert response.content_type == "application/octet-stream"
    else:
        assert response.header_length is None and len(response.chunks) == 1
        assert response.content_type == "application/json"
    result = thttp.InferResult.from_response_body(response.body(),
                                                  header_length=response.header_length)
    head = result.get_response()
    assert (head["model_name"], head["model_version"], head["id"]) == ("m", "1", "r7")
    assert head["parameters"] == {"p": 1}
    for name, want in arrays.items():
        got = result.as_numpy(name)
        if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
            assert got.dtype == want.dtype and np.array_equal(got, want), name
        elif name == "out_bytes" and not binary:  # tritonclient keeps JSON strings as str
            assert got.tolist() == [[b.decode() for b in row] for row in want.tolist()]
        else:
            assert_same(got, want)


def test_binary_outputs_are_chunks_that_view_the_arrays():
    big = np.arange(1000, dtype=np.float64)
    response = oip.build_http_infer_response(
        [oip.ResponseOutput("a", big), oip.ResponseOutput("b", np.array([1, 2], np.int8),
                                                          binary=False, parameters={"k": "v"})],
        model_name="m")
    header = orjson.loads(response.chunks[0])
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 8000}
    assert header["outputs"][1] == {"name": "b", "datatype": "INT8", "shape": [2],
                                    "data": [1, 2], "parameters": {"k": "v"}}
    assert len(response.chunks) == 2
    assert np.shares_memory(np.frombuffer(response.chunks[1], np.uint8), big)


def test_empty_binary_outputs_still_make_a_binary_body():
    response = oip.build_http_infer_response([oip.ResponseOutput("e", np.empty(0, np.int32))],
                                             model_name="m")
    assert response.header_length == len(response.chunks[0])
    result = thttp.InferResult.from_response_body(response.body(),
                                                  header_length=response.header_length)
    assert result.as_numpy("e").shape == (0,)


# --- gRPC messages ---------------------------------------------------------------------


def _triton_grpc_request(arrays: dict[str, np.ndarray]) -> bytes:
    inputs = []
    for name, arr in arrays.items():
        dt = "BYTES" if arr.dtype == object else tritonclient_utils.np_to_triton_dtype(
            arr.dtype)
        inp = tgrpc.InferInput(name, list(arr.shape), dt)
        inp.set_data_from_numpy(arr)
        inputs.append(inp)
    request = tgrpc_utils._get_inference_request(
        model_name="m", inputs=inputs, model_version="", request_id="7", outputs=None,
        sequence_id=0, sequence_start=False, sequence_end=False, priority=2, timeout=None,
        parameters={"t": 0.5})
    return request.SerializeToString()


def test_grpc_request_from_tritonclient_decodes_every_datatype():
    arrays = {f"in_{n.lower()}": sample(n, (2, 2), seed=i) for i, n in enumerate(ALL)}
    request = pb.ModelInferRequest.FromString(_triton_grpc_request(arrays))
    got = oip.arrays_from_infer_request(request)
    assert list(got) == list(arrays)
    for name, want in arrays.items():
        assert_same(got[name], want)
    assert oip.params_from_proto(request.parameters) == {"priority": 2, "t": 0.5}


def test_grpc_typed_contents_request_decodes():
    request = pb.ModelInferRequest()
    for name in TYPED:
        inp = request.inputs.add(name=name)
        inp.datatype, inp.shape[:] = oip.contents_from_array(sample(name, (3,)), inp.contents)
    request.inputs.add(name="empty", datatype="FP32", shape=[0])
    got = oip.arrays_from_infer_request(pb.ModelInferRequest.FromString(
        request.SerializeToString()))
    for name in TYPED:
        assert_same(got[name], sample(name, (3,)))
    assert got["empty"].shape == (0,)


def test_grpc_request_rules():
    request = pb.ModelInferRequest()
    request.inputs.add(name="a", datatype="INT32", shape=[1])
    request.inputs.add(name="b", datatype="INT32", shape=[1]).contents.int_contents.append(1)
    request.raw_input_contents.append(b"\x00" * 4)
    with pytest.raises(OIPError, match=r"input 'b': contents must not be set when the request "
                                       r"uses raw_input_contents"):
        oip.arrays_from_infer_request(request)
    request.inputs[1].ClearField("contents")
    with pytest.raises(OIPError, match=r"input 'b': unable to find data for this input"):
        oip.arrays_from_infer_request(request)
    request.raw_input_contents.extend([b"\x00" * 4, b"\x00" * 4])
    with pytest.raises(OIPError, match=r"3 raw_input_contents entries for 2 inputs"):
        oip.arrays_from_infer_request(request)
    del request.raw_input_contents[:]
    with pytest.raises(OIPError, match=r"input 'a': unable to find data for this input: "
                                       r"neither contents nor raw_input_contents"):
        oip.arrays_from_infer_request(request)
    request.inputs[1].name = "a"
    with pytest.raises(OIPError, match=r"the request names input 'a' twice"):
        oip.arrays_from_infer_request(request)


def test_tritonclient_reads_our_grpc_response():
    arrays = {f"out_{n.lower()}": sample(n, (2, 3), seed=i) for i, n in enumerate(ALL)}
    response = pb.ModelInferResponse(model_name="m", id="1")
    oip.fill_infer_response(response, arrays.items())
    assert len(response.raw_output_contents) == len(arrays)
    theirs = triton_pb2.ModelInferResponse.FromString(response.SerializeToString())
    result = tgrpc.InferResult(theirs)
    for name, want in arrays.items():
        assert_same(result.as_numpy(name), want)


def test_params_round_trip_through_the_proto_map():
    params = {"flag": True, "n": -3, "big": 2**63 + 5, "x": 0.25, "s": "v"}
    request = pb.ModelInferRequest()
    oip.params_to_proto(request.parameters, params)
    assert request.parameters["flag"].WhichOneof("parameter_choice") == "bool_param"
    assert request.parameters["big"].WhichOneof("parameter_choice") == "uint64_param"
    assert request.parameters["n"].WhichOneof("parameter_choice") == "int64_param"
    back = pb.ModelInferRequest.FromString(request.SerializeToString())
    assert oip.params_from_proto(back.parameters) == params
    with pytest.raises(ValueError, match="fits neither int64 nor uint64"):
        oip.params_to_proto(request.parameters, {"huge": 2**64})
    with pytest.raises(TypeError, match="is not a bool, int, float or str"):
        oip.params_to_proto(request.parameters, {"l": [1]})


# --- properties --------------------------------------------------------------------------

_SHAPES = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(NUMERIC), shape=_SHAPES, data=st.data(),
       transpose=st.booleans())
def test_property_raw_round_trip_is_bit_exact(name, shape, data, transpose):
    dt = oip.DATATYPES[name]
    count = int(np.prod(shape))
    raw = data.draw(st.binary(min_size=count * dt.itemsize, max_size=count * dt.itemsize))
    if name == "BOOL":
        raw = bytes(b & 1 for b in raw)
    arr = np.frombuffer(raw, dtype=dt.numpy_dtype()).reshape(shape)
    if transpose:
        arr = arr.T  # not C-contiguous: raw_from_array copies once
    got_dt, got_shape, buf = oip.raw_from_array(arr)
    assert (got_dt, tuple(got_shape)) == (name, arr.shape)
    back = oip.array_from_raw(buf, got_dt, got_shape, "p")
    assert back.tobytes() == np.ascontiguousarray(arr).tobytes()


@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.binary(max_size=40), max_size=12), dims=st.integers(1, 2))
def test_property_bytes_round_trip(items, dims):
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    if dims == 2:
        arr = arr.reshape(1, len(items))
    dt, shape, buf = oip.raw_from_array(arr)
    if items:  # tritonclient serialises an empty tensor to an empty array, not to b""
        assert buf == tritonclient_utils.serialize_byte_tensor(arr).item()
    else:
        assert buf == b""
    assert oip.array_from_raw(buf, dt, shape, "p").tolist() == arr.tolist()


@settings(max_examples=300, deadline=None)
@given(buf=st.binary(max_size=64), shape=st.lists(st.integers(-2, 20), max_size=3),
       name=st.sampled_from(ALL))
def test_property_any_bytes_decode_or_raise_oip_error(buf, shape, name):
    try:
        arr = oip.array_from_raw(buf, name, shape, "f")
    except OIPError:
        return
    assert arr.shape == tuple(shape)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200), header_length=st.one_of(
    st.none(), st.integers(-5, 250), st.text(max_size=5)))
def test_property_any_body_parses_or_raises_oip_error(body, header_length):
    head = b'{"inputs":[{"name":"x","datatype":"BYTES","shape":[2],' \
           b'"parameters":{"binary_data_size":%d}}]}' % len(body)
    for candidate in (body, head + body):
        try:
            request = oip.parse_http_infer_request(candidate, header_length)
            request.arrays()
        except OIPError:
            pass


# --- layering --------------------------------------------------------------------------


def test_the_package_imports_only_numpy_orjson_the_stdlib_errors_and_itself():
    """Every module of the package: a pure wire helper, usable by any transport."""
    folder = Path(oip.__file__).parent
    siblings = {"." + p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {".datatypes", ".raw", ".typed", ".infer_messages", ".binary"} <= siblings
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        top: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                top |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                top.add("." * node.level + module if node.level else module.split(".")[0])
        allowed = {"numpy", "orjson", "...errors", "__future__", *siblings}
        assert {m for m in top if m not in sys.stdlib_module_names} <= allowed, path.name
        lazy = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for a in node.names} - top
        assert lazy <= {"ml_dtypes"}, path.name
        assert len(path.read_text().splitlines()) <= 400, f"{path.name} is over 400 lines"
