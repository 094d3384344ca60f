"""`tensorwire.wire.oip.infer_messages`: gRPC `ModelInferRequest` / `ModelInferResponse`
messages and parameters, as tritonclient builds and reads them."""

from __future__ import annotations

import numpy as np
import pytest

import tensorwire.inference as pb
from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError

from .samples import ALL, TYPED, assert_same, sample

tritonclient_utils = pytest.importorskip("tritonclient.utils")
tgrpc = pytest.importorskip("tritonclient.grpc")
from tritonclient.grpc import _utils as tgrpc_utils  # noqa: E402
from tritonclient.grpc import service_pb2 as triton_pb2  # noqa: E402


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
