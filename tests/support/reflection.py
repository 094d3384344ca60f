"""What server reflection tells a client about a service's messages."""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc


def reflected_numbers(target: str, full_name: str) -> dict[str, int]:
    """Field name -> number of message `full_name` (`pkg.Message`), as reflected."""
    package, _, message = full_name.rpartition(".")
    with grpc.insecure_channel(target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(file_containing_symbol=full_name)
        (reply,) = list(stub.ServerReflectionInfo(iter([request]), timeout=30))
    for blob in reply.file_descriptor_response.file_descriptor_proto:
        fp = descriptor_pb2.FileDescriptorProto.FromString(blob)
        if fp.package != package:
            continue
        for msg in fp.message_type:
            if msg.name == message:
                return {f.name: f.number for f in msg.field}
    raise AssertionError(f"{full_name} is not reflected")
