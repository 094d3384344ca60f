"""`tensorwire.wire.oip.datatypes`: the datatype table, checked against tritonclient's,
and the `OIPError` every refusal raises."""

from __future__ import annotations

import numpy as np
import pytest

import tensorwire.inference as pb
from tensorwire.errors import InvalidArgument
from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError

from .samples import ALL

tritonclient_utils = pytest.importorskip("tritonclient.utils")


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
