"""The fixed wire vocabulary (`tensorwire/v1/types.proto`): Tensor, DType, DataFrame, File.

The message classes are built from the compiled descriptor set that sits beside the
.proto (`types.binpb`), not from generated `_pb2` code: generated code pins the protobuf
runtime to the version of the protoc that wrote it, a descriptor works with any protobuf
from 5 on. They live in a private pool so that a user who compiles types.proto into the
default pool themselves never collides with us.
"""

from __future__ import annotations

from importlib import resources

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_NAME = "tensorwire/v1/types.proto"
PACKAGE = "tensorwire.v1"


def _load_file_proto() -> descriptor_pb2.FileDescriptorProto:
    blob = resources.files(__name__).joinpath("types.binpb").read_bytes()
    fds = descriptor_pb2.FileDescriptorSet.FromString(blob)
    (file_proto,) = [f for f in fds.file if f.name == PROTO_NAME]
    return file_proto


FILE_PROTO = _load_file_proto()


def proto_source() -> str:
    """The hand-written .proto text, for `tensorwire proto --types` and exporters."""
    return resources.files(__name__).joinpath("types.proto").read_text()


def add_to_pool(pool: descriptor_pool.DescriptorPool) -> None:
    """Register types.proto in `pool` (each generated service file imports it)."""
    try:
        pool.FindFileByName(PROTO_NAME)
    except KeyError:
        pool.Add(FILE_PROTO)


POOL = descriptor_pool.DescriptorPool()
add_to_pool(POOL)

Tensor = message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.Tensor"))
DataFrame = message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.DataFrame"))
File = message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.File"))
DType = POOL.FindEnumTypeByName(f"{PACKAGE}.DType")

__all__ = ["FILE_PROTO", "POOL", "DType", "DataFrame", "File", "Tensor", "add_to_pool"]
