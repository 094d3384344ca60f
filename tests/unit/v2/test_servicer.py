"""`tensorwire.v2.servicer`: `inference.GRPCInferenceService` over one Repository: the
response as raw output contents (small and big), and the servicer's own handler on an
in-process grpc.aio server (through the one envelope): small calls' answers and
refusals, `ModelInfer`, and Triton's stream answering in order with errors in-band."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import grpc
import numpy as np
import pytest
from annotated_types import Ge

import tensorwire
import tensorwire.inference as pb
from tensorwire.codecs.v2_facet import Tensor
from tensorwire.errors import ERROR_KIND_HEADER
from tensorwire.grpc.call_envelope import GrpcEnvelope
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.v2.model import V2Model
from tensorwire.v2.raw_contents import SPLIT_MIN
from tensorwire.v2.repository import Repository
from tensorwire.v2.servicer import V2Servicer, encode_response
from tensorwire.wire import oip


@tensorwire.service
class Infer:
    @tensorwire.api
    def scale(self, x: np.ndarray, factor: Annotated[float, Ge(0)] = 2.0) -> np.ndarray:
        return x * np.float32(factor)

    @tensorwire.api
    def ticks(self, n: int) -> Iterator[int]:
        yield from range(n)


def test_outputs_go_back_as_raw_output_contents() -> None:
    model = V2Model(tensorwire.get_service_spec(Infer).apis["scale"])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    labels = np.array([b"a", b"bc"], dtype=object)
    data = encode_response(model, "r1", [Tensor("result", x),
                                         Tensor("labels", labels, {"content_type": "str"})])
    response = pb.ModelInferResponse.FromString(data)
    assert (response.model_name, response.model_version, response.id) == ("scale", "1", "r1")
    assert [(o.name, o.datatype, list(o.shape)) for o in response.outputs] == [
        ("result", "FP32", [2, 3]), ("labels", "BYTES", [2])]
    assert not response.outputs[0].HasField("contents")
    assert oip.params_from_proto(response.outputs[1].parameters) == {"content_type": "str"}
    assert response.raw_output_contents[0] == x.tobytes()
    assert response.raw_output_contents[1] == oip.serialize_bytes(labels)


def test_big_outputs_are_joined_as_protobuf_would_write_them() -> None:
    model = V2Model(tensorwire.get_service_spec(Infer).apis["scale"])
    big = np.arange(SPLIT_MIN, dtype=np.float32)  # 4 x SPLIT_MIN bytes
    small = np.arange(3, dtype=np.int64)
    data = encode_response(model, "r2", [Tensor("a", big), Tensor("b", small)])
    response = pb.ModelInferResponse.FromString(data)
    assert [o.name for o in response.outputs] == ["a", "b"]
    assert list(response.raw_output_contents) == [big.tobytes(), small.tobytes()]
    ordinary = pb.ModelInferResponse()
    ordinary.CopyFrom(response)
    assert pb.ModelInferResponse.FromString(ordinary.SerializeToString()) == response


@pytest.fixture
async def channel() -> AsyncIterator[tuple[grpc.aio.Channel, ServiceRuntime]]:
    runtime = ServiceRuntime(tensorwire.get_service_spec(Infer), Settings())
    await runtime.start()
    servicer = V2Servicer(Repository(runtime))
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((servicer.handler(
        GrpcEnvelope(runtime, logging.getLogger("test.v2"))),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield channel, runtime
    finally:
        await server.stop(None)
        await runtime.close()


def _method(channel: grpc.aio.Channel, name: str) -> Any:
    return channel.unary_unary(f"/{pb.SERVICE_NAME}/{name}")


def _infer_request(x: np.ndarray, factor: float | None = None, model: str = "scale",
                   request_id: str = "") -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name=model, id=request_id)
    inputs = {"x": x} if factor is None else {"x": x, "factor": np.array([factor])}
    for name, array in inputs.items():
        datatype, shape, data = oip.raw_from_array(array)
        request.inputs.add(name=name, datatype=datatype, shape=shape)
        request.raw_input_contents.append(bytes(data))
    return request


async def _refused(call: Any, data: bytes) -> tuple[grpc.StatusCode, str, dict[str, Any]]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call(data)
    err = info.value
    return err.code(), err.details() or "", dict(err.trailing_metadata() or ())


async def test_small_calls_answer_from_the_repository(channel) -> None:
    ch, runtime = channel
    ready = await _method(ch, "ServerReady")(pb.ServerReadyRequest().SerializeToString())
    assert pb.ServerReadyResponse.FromString(ready).ready
    model_ready = _method(ch, "ModelReady")
    for name, want in (("scale", True), ("ticks", True)):  # a stream: decoupled, ready
        reply = await model_ready(pb.ModelReadyRequest(name=name).SerializeToString())
        assert pb.ModelReadyResponse.FromString(reply).ready is want, name
    reply = await _method(ch, "ModelMetadata")(
        pb.ModelMetadataRequest(name="scale", version="1").SerializeToString())
    meta = pb.ModelMetadataResponse.FromString(reply)
    assert (meta.name, list(meta.versions), meta.platform) == ("scale", ["1"], "tensorwire")
    assert [(i.name, i.datatype, list(i.shape)) for i in meta.inputs] == [
        ("x", "", [-1]), ("factor", "FP64", [1])]
    runtime.admission.draining = True
    ready = await _method(ch, "ServerReady")(pb.ServerReadyRequest().SerializeToString())
    assert not pb.ServerReadyResponse.FromString(ready).ready
    live = await _method(ch, "ServerLive")(pb.ServerLiveRequest().SerializeToString())
    assert pb.ServerLiveResponse.FromString(live).live


async def test_small_calls_refuse_unknown_models_and_malformed_messages(channel) -> None:
    ch, _ = channel
    code, details, trailing = await _refused(
        _method(ch, "ModelMetadata"), pb.ModelMetadataRequest(name="nope").SerializeToString())
    assert code == grpc.StatusCode.NOT_FOUND
    assert details == "unknown model 'nope'; this server has: scale, ticks"
    assert trailing[ERROR_KIND_HEADER] == "NotFound"
    code, details, _ = await _refused(_method(ch, "ModelReady"), b"\xff\xff")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("malformed ModelReadyRequest: ")


async def test_model_infer_decodes_runs_and_answers_raw(channel) -> None:
    ch, _ = channel
    x = np.arange(4, dtype=np.float32)
    reply = await _method(ch, "ModelInfer")(
        _infer_request(x, 3.0, request_id="q1").SerializeToString())
    response = pb.ModelInferResponse.FromString(reply)
    assert response.id == "q1"
    [out] = response.outputs
    array = oip.array_from_raw(response.raw_output_contents[0], out.datatype, out.shape, "y")
    assert array.tolist() == (x * 3).tolist()


async def test_model_infer_refuses_before_running(channel) -> None:
    ch, _ = channel
    infer = _method(ch, "ModelInfer")
    x = np.arange(2, dtype=np.float32)
    code, details, _ = await _refused(
        infer, _infer_request(x, model="nope").SerializeToString())
    assert code == grpc.StatusCode.NOT_FOUND and "unknown model 'nope'" in details
    code, details, trailing = await _refused(
        infer, _infer_request(x, -1.0, request_id="q2").SerializeToString())
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("factor: ")
    assert trailing[ERROR_KIND_HEADER] == "InvalidArgument"
    code, details, _ = await _refused(infer, b"\x0a\xff")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("malformed ModelInferRequest")
    code, details, _ = await _refused(
        infer, pb.ModelInferRequest(model_name="ticks").SerializeToString())
    assert code == grpc.StatusCode.UNIMPLEMENTED and "is decoupled" in details


async def test_the_stream_answers_each_request_in_order_with_errors_in_band(channel
                                                                            ) -> None:
    ch, _ = channel
    x = np.arange(3, dtype=np.float32)
    requests = [
        _infer_request(x, 2.0, request_id="1").SerializeToString(),
        _infer_request(x, -1.0, request_id="2").SerializeToString(),  # breaks Ge(0)
        _infer_request(x, model="nope").SerializeToString(),
        b"\x0a\xff",  # not a message
        pb.ModelInferRequest(model_name="ticks").SerializeToString(),
        _infer_request(x, 0.5, request_id="6").SerializeToString(),
    ]
    call = ch.stream_stream(f"/{pb.SERVICE_NAME}/ModelStreamInfer")
    answers = [pb.ModelStreamInferResponse.FromString(a) async for a in call(iter(requests))]
    assert len(answers) == len(requests)
    errors = [a.error_message for a in answers]
    assert errors[0] == "" and errors[5] == ""
    assert errors[1].startswith("factor: ")
    assert errors[2] == "unknown model 'nope'; this server has: scale, ticks"
    assert errors[3].startswith("malformed ModelInferRequest")
    assert errors[4] == "n: Field required"  # a decoupled model, served in the stream
    for answer, factor in ((answers[0], 2.0), (answers[5], 0.5)):
        response = answer.infer_response
        out = response.outputs[0]
        got = oip.array_from_raw(response.raw_output_contents[0], out.datatype, out.shape,
                                 "y")
        assert got.tolist() == (x * np.float32(factor)).tolist()
    assert [answers[0].infer_response.id, answers[5].infer_response.id] == ["1", "6"]
