"""`tensorwire.wire.oip.shm_parameters`: the shared-memory parameters of a tensor, read
with Triton's rules, and an input's size against its shape; plus how the HTTP body
parser and the gRPC message reader leave a region's input to the server."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from tensorwire import inference as pb
from tensorwire.wire.oip import (
    DATATYPES,
    OIPError,
    arrays_from_infer_request,
    build_http_infer_response,
    parse_http_infer_request,
)
from tensorwire.wire.oip.binary import ResponseOutput
from tensorwire.wire.oip.shm_parameters import SharedRef, check_input_size, shared_ref


def test_no_region_is_no_reference() -> None:
    assert shared_ref({}, "x") is None
    assert shared_ref({"binary_data_size": 4}, "x") is None


def test_a_region_with_its_size_and_offset() -> None:
    params = {"shared_memory_region": "r", "shared_memory_byte_size": 64,
              "shared_memory_offset": 128}
    assert shared_ref(params, "x") == SharedRef("r", 128, 64)
    assert shared_ref({"shared_memory_region": "r", "shared_memory_byte_size": 8},
                      "x") == SharedRef("r", 0, 8)


@pytest.mark.parametrize(("params", "says"), [
    ({"shared_memory_offset": 4}, "'shared_memory_offset' can not be specified without"),
    ({"shared_memory_byte_size": 4}, "'shared_memory_byte_size' can not be specified"),
    ({"shared_memory_region": "r"}, "'shared_memory_byte_size' must be specified along"),
    ({"shared_memory_region": 7, "shared_memory_byte_size": 4},
     "'shared_memory_region' must be a region's name"),
    ({"shared_memory_region": "", "shared_memory_byte_size": 4},
     "'shared_memory_region' must be a region's name"),
    ({"shared_memory_region": "r", "shared_memory_byte_size": -1},
     "'shared_memory_byte_size' must be an integer from 0 to 2**63 - 1, got -1"),
    ({"shared_memory_region": "r", "shared_memory_byte_size": 4,
      "shared_memory_offset": 2**64 - 32}, "'shared_memory_offset' must be an integer"),
    ({"shared_memory_region": "r", "shared_memory_byte_size": True},
     "'shared_memory_byte_size' must be an integer"),
    ({"shared_memory_region": "r", "shared_memory_byte_size": "4"},
     "'shared_memory_byte_size' must be an integer"),
])
def test_refusals_name_the_tensor_and_the_parameter(params: dict, says: str) -> None:
    with pytest.raises(OIPError) as caught:
        shared_ref(params, "x")
    assert caught.value.message.startswith("input 'x': ")
    assert says in caught.value.message
    with pytest.raises(OIPError, match=r"^output 'y': "):
        shared_ref(params, "y", input=False)


def test_an_inputs_byte_size_is_its_shapes() -> None:
    fp32 = DATATYPES["FP32"]
    check_input_size(SharedRef("r", 0, 64), fp32, (1, 16), "x")
    with pytest.raises(OIPError, match=r"input 'x': 'shared_memory_byte_size' 128 does not "
                                       r"match shape \[1, 16\] of FP32 \(64 bytes\)"):
        check_input_size(SharedRef("r", 0, 128), fp32, (1, 16), "x")
    check_input_size(SharedRef("r", 0, 3), DATATYPES["BYTES"], (2,), "x")  # read checks


def test_the_http_parser_takes_an_input_in_a_region_without_data() -> None:
    header = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2],
                          "parameters": {"shared_memory_region": "r",
                                         "shared_memory_byte_size": 8}}]}
    parsed = parse_http_infer_request(orjson.dumps(header), None)
    (inp,) = parsed.inputs
    assert inp.data is None and inp.raw is None
    assert inp.parameters["shared_memory_region"] == "r"
    header["inputs"][0]["parameters"] = {}
    with pytest.raises(OIPError, match="has neither data nor binary_data_size"):
        parse_http_infer_request(orjson.dumps(header), None)


def test_the_grpc_reader_leaves_shared_inputs_out_of_the_raw_entries() -> None:
    request = pb.ModelInferRequest()
    request.inputs.add(name="a", datatype="INT32", shape=[2])
    request.inputs.add(name="b", datatype="INT32", shape=[2])
    request.raw_input_contents.append(np.array([5, 6], np.int32).tobytes())
    arrays = arrays_from_infer_request(request, shared={"a"})
    assert list(arrays) == ["b"] and arrays["b"].tolist() == [5, 6]
    with pytest.raises(OIPError, match="raw_input_contents has no entry"):
        arrays_from_infer_request(request)  # without it, b's entry is taken for a


def test_an_output_in_a_region_has_no_data_in_the_body() -> None:
    params = {"shared_memory_region": "r", "shared_memory_offset": 0,
              "shared_memory_byte_size": 12}
    built = build_http_infer_response(
        [ResponseOutput("y", np.arange(3, dtype=np.int32), parameters=params, shared=True),
         ResponseOutput("z", np.arange(2, dtype=np.int8))], model_name="m")
    head = orjson.loads(built.chunks[0])
    assert head["outputs"][0] == {"name": "y", "datatype": "INT32", "shape": [3],
                                  "parameters": params}
    assert head["outputs"][1]["parameters"] == {"binary_data_size": 2}
    assert built.chunks[1:] == [memoryview(np.arange(2, dtype=np.int8)).cast("B")]
    only = build_http_infer_response(
        [ResponseOutput("y", np.arange(3, dtype=np.int32), parameters=params, shared=True)],
        model_name="m")
    assert only.header_length is None and len(only.chunks) == 1  # plain JSON
