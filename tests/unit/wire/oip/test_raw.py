"""`tensorwire.wire.oip.raw`: tensors as raw little-endian bytes (gRPC
`raw_input_contents`, the HTTP binary extension), checked against tritonclient.

tritonclient's own code builds the requests and reads the responses wherever it can do
so without a server, so "compatible" means compatible with the reference client, not
with our reading of the spec.
"""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError

from .samples import ALL, NUMERIC, assert_same, sample

tritonclient_utils = pytest.importorskip("tritonclient.utils")
thttp = pytest.importorskip("tritonclient.http")

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
