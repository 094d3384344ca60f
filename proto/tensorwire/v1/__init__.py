"""The fixed wire vocabulary (`tensorwire/v1/types.proto`): Tensor, DType, DataFrame, File.

The message classes are built from the compiled descriptor set that sits beside the
.proto (`types.binpb`), not from generated `_pb2` code: generated code pins the protobuf
runtime to the version of the protoc that wrote it, a descriptor works with any protobuf
from 5 on. They live in a private pool so that a user who compiles types.proto into the
default pool themselves never collides with us.
"""

from __future__ import annotations

from dataclasses import dataclass
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


#: Field options (see types.proto): a Tensor field's declared dtype and shape, the
#: JSON Schema of a string field that holds JSON text, and a required input.
DTYPE_OPTION = POOL.FindExtensionByName(f"{PACKAGE}.dtype")
SHAPE_OPTION = POOL.FindExtensionByName(f"{PACKAGE}.shape")
JSON_SCHEMA_OPTION = POOL.FindExtensionByName(f"{PACKAGE}.json_schema")
REQUIRED_OPTION = POOL.FindExtensionByName(f"{PACKAGE}.required")
_FieldOptions = message_factory.GetMessageClass(DTYPE_OPTION.containing_type)


@dataclass(frozen=True)
class FieldHints:
    """What a field's tensorwire options say (None where an option is not set)."""

    #: NumPy name of a Tensor field's declared dtype ("float32", "bfloat16", ...)
    dtype: str | None = None
    #: a Tensor field's declared shape, -1 for a free size
    shape: tuple[int, ...] | None = None
    #: the JSON Schema (text) of a string field that holds JSON text
    json_schema: str | None = None
    #: a request field whose input the API requires
    required: bool = False


def format_shape(dims: tuple[int, ...] | list[int]) -> str:
    """`(2, 3)`, `(*, 4)`, `(4,)`, `()`: a tuple as Python writes it, `*` for -1."""
    items = ["*" if d == -1 else str(d) for d in dims]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def parse_shape(text: str) -> tuple[int, ...]:
    """The inverse of `format_shape`; ValueError for anything else."""
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise ValueError(f"not a shape: {text!r}")
    items = [p.strip() for p in inner[1:-1].split(",")]
    if items and items[-1] == "":
        items.pop()
    return tuple(-1 if p == "*" else int(p) for p in items)


def tensor_field_options(dtype: str | None, shape: tuple[int, ...] | None) -> bytes:
    """Serialised FieldOptions declaring a Tensor field's dtype and shape."""
    options = _FieldOptions()
    if dtype is not None:
        options.Extensions[DTYPE_OPTION] = DType.values_by_name[dtype.upper()].number
    if shape is not None:
        options.Extensions[SHAPE_OPTION] = format_shape(shape)
    return options.SerializeToString()


def json_field_options(json_schema: str) -> bytes:
    """Serialised FieldOptions marking a string field as JSON text of this schema."""
    options = _FieldOptions()
    options.Extensions[JSON_SCHEMA_OPTION] = json_schema
    return options.SerializeToString()


def required_field_options() -> bytes:
    """Serialised FieldOptions marking a request field as a required input."""
    options = _FieldOptions()
    options.Extensions[REQUIRED_OPTION] = True
    return options.SerializeToString()


def _field_options(options: Any) -> Any:
    data = options if isinstance(options, bytes) else options.SerializeToString()
    return _FieldOptions.FromString(data)


def field_hints(options: Any) -> FieldHints:
    """The hints in FieldOptions (of any pool, where our extensions may be unknown)."""
    opts = _field_options(options)
    ext = opts.Extensions
    dtype = (DType.values_by_number[ext[DTYPE_OPTION]].name.lower()
             if opts.HasExtension(DTYPE_OPTION) else None)
    shape = parse_shape(ext[SHAPE_OPTION]) if opts.HasExtension(SHAPE_OPTION) else None
    schema = ext[JSON_SCHEMA_OPTION] if opts.HasExtension(JSON_SCHEMA_OPTION) else None
    return FieldHints(dtype, shape, schema, bool(ext[REQUIRED_OPTION]))


def field_options_text(options: Any) -> list[str]:
    """The options as `.proto` source writes them in a field's brackets."""
    opts = _field_options(options)
    out = []
    if opts.HasExtension(DTYPE_OPTION):
        name = DType.values_by_number[opts.Extensions[DTYPE_OPTION]].name
        out.append(f"({DTYPE_OPTION.full_name}) = {name}")
    for ext in (SHAPE_OPTION, JSON_SCHEMA_OPTION):
        if opts.HasExtension(ext):
            text = opts.Extensions[ext].replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'({ext.full_name}) = "{text}"')
    if opts.Extensions[REQUIRED_OPTION]:
        out.append(f"({REQUIRED_OPTION.full_name}) = true")
    return out


__all__ = ["DTYPE_OPTION", "FILE_PROTO", "FILE_PROTOS", "JSON_SCHEMA_OPTION", "POOL",
           "REQUIRED_OPTION", "ROOT_INPUT", "SHAPE_OPTION", "DType", "DataFrame",
           "FieldHints", "File", "Tensor", "add_to_pool", "field_hints", "field_options_text",
           "format_shape", "is_root_input", "json_field_options", "parse_shape",
           "required_field_options", "root_input_options", "tensor_field_options"]
