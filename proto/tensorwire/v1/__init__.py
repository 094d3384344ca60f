"""The fixed wire vocabulary (`tensorwire/v1/types.proto`): Tensor, DType, DataFrame, File.

The message classes are built from the compiled descriptor set that sits beside the
.proto (`types.binpb`), not from generated `_pb2` code: generated code pins the protobuf
runtime to the version of the protoc that wrote it, a descriptor works with any protobuf
from 5 on. They live in a private pool so that a user who compiles types.proto into the
default pool themselves never collides with us.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PROTO_NAME = "tensorwire/v1/types.proto"
PACKAGE = "tensorwire.v1"


def _load_file_proto() -> descriptor_pb2.FileDescriptorProto:
    blob = resources.files(__name__).joinpath("types.binpb").read_bytes()
    fds = descriptor_pb2.FileDescriptorSet.FromString(blob)
    (file_proto,) = [f for f in fds.file if f.name == PROTO_NAME]
    return file_proto


FILE_PROTO = _load_file_proto()


def _descriptor_file_proto() -> descriptor_pb2.FileDescriptorProto:
    fp = descriptor_pb2.FileDescriptorProto()
    descriptor_pb2.DESCRIPTOR.CopyToProto(fp)
    return fp


#: types.proto after what it imports (google/protobuf/descriptor.proto, for its method
#: options): the order a pool adds them in.
FILE_PROTOS = (_descriptor_file_proto(), FILE_PROTO)


def proto_source() -> str:
    """The hand-written .proto text, for `tensorwire proto --types` and exporters."""
    return resources.files(__name__).joinpath("types.proto").read_text()


def add_to_pool(pool: descriptor_pool.DescriptorPool) -> None:
    """Register types.proto and its imports in `pool` (each generated service file
    imports it)."""
    for file_proto in FILE_PROTOS:
        try:
            pool.FindFileByName(file_proto.name)
        except KeyError:
            pool.Add(file_proto)


POOL = descriptor_pool.DescriptorPool()
add_to_pool(POOL)

Tensor = message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.Tensor"))
DataFrame = message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.DataFrame"))
File = message_factory.GetMessageClass(POOL.FindMessageTypeByName(f"{PACKAGE}.File"))
DType = POOL.FindEnumTypeByName(f"{PACKAGE}.DType")

#: `option (tensorwire.v1.root_input) = true;` on an rpc: the API takes a root input.
ROOT_INPUT = POOL.FindExtensionByName(f"{PACKAGE}.root_input")
_MethodOptions = message_factory.GetMessageClass(ROOT_INPUT.containing_type)


def root_input_options() -> bytes:
    """Serialised MethodOptions that mark an rpc as taking a root input."""
    options = _MethodOptions()
    options.Extensions[ROOT_INPUT] = True
    return options.SerializeToString()


def is_root_input(options: Any) -> bool:
    """Whether MethodOptions (of any pool, where the extension may be an unknown field)
    mark the rpc as taking a root input."""
    data = options if isinstance(options, bytes) else options.SerializeToString()
    return bool(_MethodOptions.FromString(data).Extensions[ROOT_INPUT])

__all__ = ["FILE_PROTO", "FILE_PROTOS", "POOL", "ROOT_INPUT", "DType", "DataFrame", "File",
           "Tensor", "add_to_pool", "is_root_input", "root_input_options"]
