"""`tensorwire.inference` is wire-compatible with the Open Inference Protocol as Triton
compiles it: every message, enum and rpc we define matches tritonclient's own
descriptors (grpc_service.proto and the model_config.proto it imports), and no message
or rpc of Triton's is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

import tensorwire.inference as oip_proto
from tests.unit.test_lazy_imports import imported_modules

triton_pb2 = pytest.importorskip("tritonclient.grpc.service_pb2")
triton_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")

FDP = descriptor_pb2.FieldDescriptorProto


def _field_rows(message: descriptor_pb2.DescriptorProto) -> dict[str, tuple]:
    """What decides the wire of each field of one message (and its JSON mapping: the
    JSON name derives from the field name, neither proto sets one of its own)."""
    rows = {}
    for f in message.field:
        oneof = message.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") else None
        rows[f.name] = (f.number, FDP.Type.Name(f.type), FDP.Label.Name(f.label),
                        f.type_name, oneof, f.proto3_optional, f.HasField("json_name")
                        and f.json_name != _default_json_name(f.name))
    return rows


def _default_json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _messages(file_proto: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.
                                                                       DescriptorProto]:
    """Every message of a file by full name, nested ones (map entries included) too."""
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for m in messages:
            full = f"{prefix}.{m.name}"
            out[full] = m
            walk(full, list(m.nested_type))

    walk(file_proto.package, list(file_proto.message_type))
    return out


def _file_proto(descriptor) -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto()
    descriptor.CopyToProto(fp)
    return fp


def _enums(file_proto: descriptor_pb2.FileDescriptorProto) -> dict[str, list[tuple[str, int]]]:
    """Every enum of a file by full name (nested ones too), as (value name, number)."""
    out: dict[str, list[tuple[str, int]]] = {}

    def walk(prefix: str, messages, enums) -> None:
        for e in enums:
            out[f"{prefix}.{e.name}"] = [(v.name, v.number) for v in e.value]
        for m in messages:
            walk(f"{prefix}.{m.name}", m.nested_type, m.enum_type)

    walk(file_proto.package, file_proto.message_type, file_proto.enum_type)
    return out


OURS = {k: v for f in oip_proto.FILE_PROTOS for k, v in _messages(f).items()}
TRITON = {k: v for d in (triton_pb2.DESCRIPTOR, triton_config_pb2.DESCRIPTOR)
          for k, v in _messages(_file_proto(d)).items()}


def test_the_service_is_inference_grpc_inference_service():
    assert oip_proto.SERVICE.full_name == "inference.GRPCInferenceService"
    assert oip_proto.SERVICE_NAME == "inference.GRPCInferenceService"
    assert oip_proto.method_path("ModelInfer") == "/inference.GRPCInferenceService/ModelInfer"
    assert oip_proto.method_path("RepositoryIndex") == \
        "/inference.GRPCInferenceService/RepositoryIndex"
    with pytest.raises(KeyError):
        oip_proto.method_path("ModelExplain")


def test_every_oip_message_is_defined():
    expected = {
        "ServerLiveRequest", "ServerLiveResponse", "ServerReadyRequest", "ServerReadyResponse",
        "ModelReadyRequest", "ModelReadyResponse", "ServerMetadataRequest",
        "ServerMetadataResponse", "ModelMetadataRequest", "ModelMetadataResponse",
        "ModelMetadataResponse.TensorMetadata", "ModelInferRequest",
        "ModelInferRequest.InferInputTensor", "ModelInferRequest.InferRequestedOutputTensor",
        "ModelInferResponse", "ModelInferResponse.InferOutputTensor",
        "ModelStreamInferResponse", "InferParameter", "InferTensorContents",
    }
    assert {f"inference.{m}" for m in expected} <= set(OURS)


def test_no_message_of_tritons_is_missing():
    """The whole of Triton's two files: a client compiled from either finds every type."""
    assert set(TRITON) - set(OURS) == set()


def test_every_enum_matches_tritons():
    ours = {k: v for f in oip_proto.FILE_PROTOS for k, v in _enums(f).items()}
    theirs = {k: v for d in (triton_pb2.DESCRIPTOR, triton_config_pb2.DESCRIPTOR)
              for k, v in _enums(_file_proto(d)).items()}
    assert ours == theirs
    assert ("TYPE_FP32", 11) in ours["inference.DataType"]


@pytest.mark.parametrize("name", sorted(OURS))
def test_each_message_matches_tritons_field_by_field(name: str):
    assert name in TRITON, f"{name} is not in Triton's grpc_service.proto"
    ours, theirs = OURS[name], TRITON[name]
    assert _field_rows(ours) == _field_rows(theirs)
    assert [o.name for o in ours.oneof_decl] == [o.name for o in theirs.oneof_decl]
    assert ours.options.map_entry == theirs.options.map_entry


def test_the_comparison_sees_a_wrong_field_number():
    """The field-by-field check is not vacuous: a renumbered field differs."""
    changed = descriptor_pb2.DescriptorProto()
    changed.CopyFrom(OURS["inference.ModelInferRequest"])
    next(f for f in changed.field if f.name == "raw_input_contents").number = 8
    assert _field_rows(changed) != _field_rows(TRITON["inference.ModelInferRequest"])


def test_each_rpc_matches_tritons():
    theirs = {m.name: m for m in triton_pb2.DESCRIPTOR.services_by_name[
        "GRPCInferenceService"].methods}
    assert [m.name for m in oip_proto.SERVICE.methods] == [m.name for m in theirs.values()]
    assert len(theirs) == 20
    for m in oip_proto.SERVICE.methods:
        t = theirs[m.name]
        assert m.input_type.full_name == t.input_type.full_name, m.name
        assert m.output_type.full_name == t.output_type.full_name, m.name
        assert (m.client_streaming, m.server_streaming) == (
            t.client_streaming, t.server_streaming), m.name
    stream = oip_proto.SERVICE.methods_by_name["ModelStreamInfer"]
    assert stream.client_streaming and stream.server_streaming
    assert stream.output_type.full_name == "inference.ModelStreamInferResponse"


def test_messages_round_trip_through_tritons_classes():
    """Both definitions live in one process (ours in a private pool) and read each
    other's bytes: tritonclient's request parses as ours, our response as Triton's."""
    req = triton_pb2.ModelInferRequest(model_name="m", id="1")
    inp = req.inputs.add(name="x", datatype="FP32", shape=[2, 2])
    inp.parameters["note"].string_param = "n"
    req.parameters["priority"].uint64_param = 3
    req.parameters["scale"].double_param = 0.5
    req.raw_input_contents.append(b"\x00" * 16)
    ours = oip_proto.ModelInferRequest.FromString(req.SerializeToString())
    assert ours.inputs[0].name == "x" and list(ours.inputs[0].shape) == [2, 2]
    assert ours.inputs[0].parameters["note"].string_param == "n"
    assert ours.parameters["priority"].uint64_param == 3
    assert ours.parameters["scale"].double_param == 0.5
    assert ours.raw_input_contents[0] == b"\x00" * 16

    resp = oip_proto.ModelStreamInferResponse(error_message="")
    resp.infer_response.model_name = "m"
    out = resp.infer_response.outputs.add(name="y", datatype="BYTES", shape=[1])
    out.contents.bytes_contents.append(b"hi")
    back = triton_pb2.ModelStreamInferResponse.FromString(resp.SerializeToString())
    assert back.infer_response.outputs[0].contents.bytes_contents == [b"hi"]
    assert back.SerializeToString() == resp.SerializeToString()


def test_the_private_pool_does_not_touch_the_default_pool():
    from google.protobuf import descriptor_pool

    assert oip_proto.POOL is not descriptor_pool.Default()
    assert oip_proto.ModelInferRequest.DESCRIPTOR.file.pool is oip_proto.POOL


def test_nested_messages_are_exported_under_their_protocol_names():
    assert oip_proto.InferInputTensor.DESCRIPTOR.full_name == \
        "inference.ModelInferRequest.InferInputTensor"
    assert oip_proto.TensorMetadata.DESCRIPTOR.full_name == \
        "inference.ModelMetadataResponse.TensorMetadata"


def test_descriptor_set_matches_the_proto_source(tmp_path: Path):
    """grpc_service.binpb is what protoc makes of grpc_service.proto (`make proto`)."""
    # In a subprocess, as test_protogen's: in-process protoc can crash a worker that has
    # loaded TensorFlow (which bundles its own protobuf).
    root = Path(oip_proto.__file__).parents[1]
    out = tmp_path / "grpc_service.binpb"
    rc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{root}",
                         "--include_imports", f"--descriptor_set_out={out}",
                         oip_proto.PROTO_NAME],
                        timeout=60).returncode
    assert rc == 0
    assert out.read_bytes() == (Path(oip_proto.__file__).parent / "grpc_service.binpb"
                                ).read_bytes()
    assert "service GRPCInferenceService" in oip_proto.proto_source()
    assert "\nmessage ModelConfig\n" in oip_proto.proto_source(oip_proto.CONFIG_PROTO_NAME)


def test_tritonclient_grpc_runs_on_our_protobuf_without_warnings():
    """tritonclient's `grpc` extra pins protobuf<7, so the dev extra does not ask for
    it; its generated code must still load on the protobuf tensorwire installs."""
    proc = subprocess.run([sys.executable, "-W", "error", "-c",
                           "import tritonclient.grpc, tritonclient.grpc.service_pb2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_import_tensorwire_does_not_load_the_inference_vocabulary():
    names = imported_modules("import tensorwire")
    assert "tensorwire" in names
    assert not {n for n in names if n.startswith(("tensorwire.inference", "tensorwire.wire.oip"))}
