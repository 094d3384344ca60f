"""The Open Inference Protocol on a real server: health, metadata, the binary extension
in both directions, raw and typed gRPC contents, streams, and clear errors for bad input.
"""

from __future__ import annotations

import json
import struct
import typing as t

import grpc
import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from tritonclient.utils import InferenceServerException

from examples.images import ImageTools
from examples.iris import Iris
from examples.llm_stream import LanguageModel
from examples.quickstart import Quickstart
from tensorwire import inference as pb
from tests.support.http_calls import get, post, request
from tests.support.servers import serving
from tests.support.v2_calls import MODES, grpc_client, http_client, infer, texts

from .services import Tensors

X = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
IHCL = "Inference-Header-Content-Length"


def summarize_inputs(text: str = "one two three", max_words: int = 2) -> dict[str, t.Any]:
    return {"text": texts(text), "max_words": np.array([max_words])}


# ---------------------------------------------------------------- health and metadata


def test_server_health_and_metadata_on_both_ports(servers: t.Any) -> None:
    server = servers[Quickstart]
    http, grpc_ = http_client(server), grpc_client(server)
    for client in (http, grpc_):
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("summarize")
        assert client.is_model_ready("summarize", "1")
        assert client.is_model_ready("spell")  # a stream: a decoupled model
    extensions = ["binary_tensor_data", "model_configuration", "model_repository",
                  "statistics"]
    assert http.get_server_metadata()["extensions"] == extensions
    meta = grpc_.get_server_metadata(as_json=True)
    assert (meta["name"], meta["extensions"]) == ("tensorwire", extensions)
    assert get(f"{server.http_url}/v2/health/live").json() == {"live": True}
    assert get(f"{server.http_url}/v2/health/ready").json() == {"ready": True}
    spell = get(f"{server.http_url}/v2/models/spell/ready")
    assert spell.status == 200 and spell.json()["ready"]


def test_model_metadata_over_http_and_grpc(servers: t.Any) -> None:
    server = servers[Iris]
    want = {"name": "classify", "versions": ["1"], "platform": "tensorwire",
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4]}],
            "outputs": [{"name": "result", "datatype": "", "shape": [-1]}]}
    assert http_client(server).get_model_metadata("classify") == want
    assert http_client(server).get_model_metadata("classify", "1") == want
    meta = grpc_client(server).get_model_metadata("classify")
    assert (meta.name, list(meta.versions), meta.platform) == ("classify", ["1"], "tensorwire")
    assert [(i.name, i.datatype, list(i.shape)) for i in meta.inputs] == [
        ("x", "FP32", [1, 4])]


def test_unknown_models_and_versions_are_404_and_not_found(servers: t.Any) -> None:
    server = servers[Quickstart]
    reply = get(f"{server.http_url}/v2/models/nope")
    assert reply.status == 404
    assert reply.json()["error"] == (
        "unknown model 'nope'; this server has: summarize, upper, count, spell")
    assert get(f"{server.http_url}/v2/models/summarize/versions/2").status == 404
    with pytest.raises(InferenceServerException, match="has no version '2'"):
        infer("http-binary", server, "summarize", summarize_inputs(), model_version="2")
    for mode in ("grpc", "grpc-aio"):
        with pytest.raises(InferenceServerException) as info:
            infer(mode, server, "nope", summarize_inputs())
        assert info.value.status() == "StatusCode.NOT_FOUND"
    with pytest.raises(InferenceServerException, match="NOT_FOUND"):
        grpc_client(server).get_model_metadata("summarize", "7")
    assert post(f"{server.http_url}/v2/models/summarize", b"{}").status == 405


def test_the_repository_index_lists_a_stream_as_ready(servers: t.Any) -> None:
    index = http_client(servers[LanguageModel]).get_model_repository_index()
    assert [(m["name"], m["state"]) for m in index] == [
        ("generate", "READY"), ("agenerate", "READY")]  # decoupled models
    ready = post(f"{servers[Quickstart].http_url}/v2/repository/index", {"ready": True})
    assert [m["name"] for m in ready.json()] == ["summarize", "upper", "count", "spell"]


def test_inferring_on_a_stream_is_unimplemented_with_the_reason(servers: t.Any) -> None:
    server = servers[Quickstart]
    with pytest.raises(InferenceServerException) as info:
        infer("http-binary", server, "spell", {"word": texts("hi")})
    assert info.value.status() == "501"
    assert "model 'spell' is decoupled (it streams its output" in str(info.value)
    assert "ModelStreamInfer" in str(info.value)
    with pytest.raises(InferenceServerException) as info:
        infer("grpc", server, "spell", {"word": texts("hi")})
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"


def test_grpc_health_and_reflection_list_the_v2_service(servers: t.Any) -> None:
    server = servers[Quickstart]
    with grpc.insecure_channel(server.grpc_target) as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        reply = check(health_pb2.HealthCheckRequest(service=pb.SERVICE_NAME), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        db = ProtoReflectionDescriptorDatabase(channel)
        assert pb.SERVICE_NAME in db.get_services()
        service = db.FindFileContainingSymbol(pb.SERVICE_NAME)
        assert "ModelInfer" in [m.name for s in service.service for m in s.method]


# ---------------------------------------------------------------- the binary extension


def test_binary_request_and_response_framing(servers: t.Any) -> None:
    """The wire itself: JSON header, then the binary input; the answer mixes a binary
    output (listed with binary_data) and a JSON one, and says where the header ends."""
    server = servers[Quickstart]
    head = json.dumps({
        "id": "req-1",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1],
                    "parameters": {"binary_data_size": 4 + 7}},
                   {"name": "max_words", "datatype": "INT64", "shape": [1], "data": [1]}],
        "outputs": [{"name": "summary", "parameters": {"binary_data": True}},
                    {"name": "words", "parameters": {"binary_data": False}}],
    }).encode()
    body = head + struct.pack("<I", 7) + b"a b c d"
    reply = request(f"{server.http_url}/v2/models/summarize/infer", method="POST",
                    data=body, headers={IHCL: str(len(head))})  # no Content-Type
    assert reply.status == 200, reply.body
    length = int(reply.headers[IHCL])
    answer = json.loads(reply.body[:length])
    assert answer["id"] == "req-1" and answer["model_version"] == "1"
    summary, words = answer["outputs"]
    assert summary == {"name": "summary", "datatype": "BYTES", "shape": [1],
                       "parameters": {"binary_data_size": 5}}
    assert reply.body[length:] == struct.pack("<I", 1) + b"a"
    assert words == {"name": "words", "datatype": "INT64", "shape": [1], "data": [4]}


def test_a_raw_body_fills_the_only_input(servers: t.Any) -> None:
    """Triton's Inference-Header-Content-Length: 0: the body is the input's bytes."""
    iris = servers[Iris]
    reply = request(f"{iris.http_url}/v2/models/predict/infer", method="POST",
                    data=X.tobytes(), headers={IHCL: "0"})
    assert reply.status == 200, reply.body
    length = int(reply.headers[IHCL])
    (out,) = json.loads(reply.body[:length])["outputs"]
    assert (out["datatype"], out["shape"]) == ("FP32", [1, 3])
    probabilities = np.frombuffer(reply.body[length:], "<f4")
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-5)
    upper = request(f"{servers[Quickstart].http_url}/v2/models/upper/infer", method="POST",
                    data="héllo".encode(), headers={IHCL: "0"})
    assert upper.body.endswith(struct.pack("<I", 6) + "HÉLLO".encode())
    several = request(f"{servers[Quickstart].http_url}/v2/models/summarize/infer",
                      method="POST", data=b"abc", headers={IHCL: "0"})
    assert several.status == 400
    assert "needs a model with exactly one input" in several.json()["error"]


def test_ids_are_echoed_and_requested_outputs_filter_the_reply(servers: t.Any) -> None:
    server = servers[Quickstart]
    for mode in MODES:
        reply = infer(mode, server, "summarize", summarize_inputs(), outputs=["words"],
                      request_id="abc-7")
        assert reply.id == "abc-7", mode
        assert list(reply.outputs) == ["words"] and reply.outputs["words"].tolist() == [3]
        with pytest.raises(InferenceServerException) as info:
            infer(mode, server, "summarize", summarize_inputs(), outputs=["nope"])
        assert "outputs.nope: unknown output; this model has: summary, words" in str(
            info.value)


def test_compressed_bodies_are_read_as_tritonclient_sends_them(servers: t.Any) -> None:
    server = servers[Iris]
    for algorithm in ("gzip", "deflate"):
        reply = infer("http-binary", server, "classify", {"x": X},
                      request_compression_algorithm=algorithm,
                      response_compression_algorithm=algorithm)
        assert reply.outputs["result"].shape == (1, 3)
    reply = infer("grpc", server, "classify", {"x": X}, compression_algorithm="gzip")
    assert reply.outputs["result"].sum() == pytest.approx(1.0, abs=1e-5)


def test_big_tensors_round_trip_on_every_mode_but_json() -> None:
    """16 MiB each way: views of the received bytes in, the array's memory out."""
    big = np.random.default_rng(1).standard_normal(4 * 1024 * 1024).astype(np.float32)
    with serving(Tensors) as server:
        for mode in ("http-binary", "grpc", "grpc-aio"):
            reply = infer(mode, server, "echo", {"x": big.reshape(1024, 4096)})
            np.testing.assert_array_equal(reply.outputs["result"], big.reshape(1024, 4096))
        strings = infer("grpc", server, "echo", {"x": texts("ä", "", "z" * 70_000)})
        assert strings.outputs["result"].tolist() == ["ä".encode(), b"", b"z" * 70_000]


def test_fp16_and_bf16_travel_as_raw_bytes() -> None:
    with serving(Tensors) as server:
        half = np.array([0.5, -2.0, 65504.0], np.float16)
        for mode in ("http-binary", "grpc"):
            assert infer(mode, server, "echo", {"x": half}).outputs["result"].tolist() == \
                half.tolist()
        client = grpc_client(server)
        tensor = tg.InferInput("x", [3], "BF16")
        tensor.set_data_from_numpy(np.array([1.0, 3.0, -8.0], ml_dtypes.bfloat16))
        result = client.infer("halve", [tensor])
        assert result.get_response().outputs[0].datatype == "BF16"
        assert result.as_numpy("result").astype(np.float32).tolist() == [0.5, 1.5, -4.0]
        typed = pb.ModelInferRequest(model_name="echo")
        typed.inputs.add(name="x", datatype="FP16", shape=[1]).contents.fp32_contents.append(1)
        with pytest.raises(grpc.RpcError) as info:
            _call(server, "ModelInfer", typed)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "FP16 has no typed contents field" in info.value.details()


# ---------------------------------------------------------------- gRPC contents


def _call(server: t.Any, method: str, message: t.Any, response: t.Any = None) -> t.Any:
    with grpc.insecure_channel(server.grpc_target) as channel:
        call = channel.unary_unary(pb.method_path(method),
                                   request_serializer=lambda m: m if isinstance(m, bytes)
                                   else m.SerializeToString(),
                                   response_deserializer=(response or pb.ModelInferResponse
                                                          ).FromString)
        return call(message, timeout=30)


def test_typed_contents_are_accepted_and_the_answer_is_raw(servers: t.Any) -> None:
    server = servers[Iris]
    msg = pb.ModelInferRequest(model_name="classify", id="t1")
    msg.inputs.add(name="x", datatype="FP32", shape=[1, 4]).contents.fp32_contents.extend(
        X.ravel().tolist())
    reply = _call(server, "ModelInfer", msg)
    assert reply.id == "t1" and len(reply.raw_output_contents) == 1
    assert not reply.outputs[0].HasField("contents")
    assert np.frombuffer(reply.raw_output_contents[0], "<f4").sum() == pytest.approx(1.0)


def test_grpc_refuses_mixed_contents_bad_sizes_and_malformed_messages(servers: t.Any) -> None:
    server = servers[Iris]
    mixed = pb.ModelInferRequest(model_name="classify")
    mixed.inputs.add(name="x", datatype="FP32", shape=[1, 4]).contents.fp32_contents.append(1)
    mixed.raw_input_contents.append(X.tobytes())
    short = pb.ModelInferRequest(model_name="classify")
    short.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    short.raw_input_contents.append(X.tobytes()[:-1])
    for message, says in ((mixed, "contents must not be set"),
                          (short, "has 15 bytes of data, but shape [1, 4] of FP32 needs 16"),
                          (b"\xff\xff\xff", "malformed ModelInferRequest")):
        with pytest.raises(grpc.RpcError) as info:
            _call(server, "ModelInfer", message)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert says in info.value.details()
    assert grpc_client(server).is_server_live()


def test_the_stream_answers_in_order_with_errors_in_band(servers: t.Any) -> None:
    server = servers[Quickstart]
    answers: list[t.Any] = []
    client = grpc_client(server)
    client.start_stream(callback=lambda result, error: answers.append((result, error)))
    for n in (1, 0, 2):  # max_words 0 breaks Ge(1): an in-band error, then on
        inputs = [tg.InferInput("text", [1], "BYTES"), tg.InferInput("max_words", [1], "INT64")]
        inputs[0].set_data_from_numpy(texts("a b c"))
        inputs[1].set_data_from_numpy(np.array([n]))
        client.async_stream_infer("summarize", inputs, request_id=str(n))
    client.stop_stream()
    assert [r.as_numpy("summary").tolist() if r else None for r, _ in answers] == [
        [b"a"], None, [b"a b"]]
    assert "max_words: Input should be greater than or equal to 1" in str(answers[1][1])


# ---------------------------------------------------------------- bad input


BAD: list[tuple[str, type, str, dict[str, t.Any], str]] = [
    ("dtype", Iris, "classify", {"x": X.astype(np.float64)},
     "x: expected dtype float32, got float64"),
    ("shape", Iris, "classify", {"x": np.repeat(X, 2, axis=0)},
     "x: expected shape (1, 4), got (2, 4)"),
    ("constraint", Quickstart, "summarize", summarize_inputs(max_words=0),
     "max_words: Input should be greater than or equal to 1"),
    ("missing", Quickstart, "summarize", {"max_words": np.array([1])},
     "text: Field required"),
    ("unknown", Quickstart, "upper", {"text": texts("a"), "extra": texts("b")},
     "extra: unknown input; this model takes: text"),
    ("content-type", ImageTools, "mirror_png", {"data": texts(b"GIF89a....")},
     "data: "),
    ("not-an-image", ImageTools, "upload_image", {"image": texts(b"plain words")},
     "image: the content is not an image PIL can read"),
    ("one-element", Quickstart, "summarize",
     {"text": texts("a", "b"), "max_words": np.array([1])},
     "text: expects one element (shape [1]), got shape [2]"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("case", "service", "api", "inputs", "says"), BAD,
                         ids=[b[0] for b in BAD])
def test_bad_input_is_400_or_invalid_argument_naming_the_input(
        servers: t.Any, mode: str, case: str, service: type, api: str,
        inputs: dict[str, t.Any], says: str) -> None:
    if mode == "http-json" and case in ("content-type", "not-an-image"):
        pytest.skip("binary bytes have no JSON form")
    server = servers[service]
    with pytest.raises(InferenceServerException) as info:
        infer(mode, server, api, inputs)
    status = info.value.status()
    assert status == ("400" if mode.startswith("http") else "StatusCode.INVALID_ARGUMENT")
    assert says in info.value.message()
    assert http_client(server).is_server_ready()  # and it keeps serving


def test_http_framing_errors_are_400(servers: t.Any) -> None:
    url = f"{servers[Iris].http_url}/v2/models/classify/infer"
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                                   "parameters": {"binary_data_size": 16}}]}).encode()
    for body, headers, says in (
            (b"{not json", {}, "not valid JSON"),
            (head + X.tobytes()[:8], {IHCL: str(len(head))}, "runs past the end of the body"),
            (head + X.tobytes(), {IHCL: str(len(head) + 100)}, "exceeds the body's"),
            (head + X.tobytes(), {IHCL: "-1"}, "is negative"),
            (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                                     "data": [1, 2, 3]}]}).encode(), {},
             "data has 3 elements, but shape [1, 4] needs 4")):
        reply = request(url, method="POST", data=body, headers=headers)
        assert reply.status == 400, (says, reply.body)
        assert says in reply.json()["error"]


def test_no_v2_serves_neither_port() -> None:
    with serving(Quickstart, v2=False) as server:
        assert get(f"{server.http_url}/v2").status == 404
        with pytest.raises(InferenceServerException) as info:
            grpc_client(server).is_server_live()
        assert info.value.status() == "StatusCode.UNIMPLEMENTED"
        assert th.InferenceServerClient(f"127.0.0.1:{server.http_port}").is_server_live() \
            is False
