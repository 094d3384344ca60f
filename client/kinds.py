"""The client's kinds in one table: how each contract node and message field travels.

Over HTTP, `schema_kind` turns one node of the server's `/schema.json` into a kind
(`jsonkinds`); over gRPC, `field_kind` turns one field descriptor got by reflection
into a field kind (`protokinds`). Framework types (tensors, files, data frames) are
told apart by what the server's codecs emit and listed here, once; the kind modules
know nothing of this table, so nothing registers itself and nothing imports back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from .. import v1
from .files import BytesKind, FileElement, FileKind
from .frames import FrameElement, FrameKind, is_frame_schema
from .jsonkinds import (
    DateTimeKind,
    DurationKind,
    JsonKind,
    ListKind,
    MapKind,
    ObjectKind,
    OptionalKind,
    TextKind,
    UnionKind,
)
from .protofields import FieldKind, Model
from .protokinds import (
    Duration,
    Element,
    Enum,
    JsonText,
    ListValue,
    Scalar,
    Struct,
    Timestamp,
    Value,
)
from .tensors import TensorElement, TensorKind, is_tensor_schema

#: Framework families by the schema.json node their codec emits (checked first):
#: tensors (`type: array` + a tensor `format`, or BentoML's `type: tensor`), files
#: (`type: file`, images with `pil: true`), frames (`format: pandas-dataframe`).
SchemaMatch = Callable[[dict[str, Any]], bool]
SCHEMA_FAMILIES: list[tuple[SchemaMatch, Callable[[dict[str, Any]], JsonKind]]] = [
    (is_tensor_schema, TensorKind),
    (lambda s: s.get("type") == "file", FileKind),
    (is_frame_schema, FrameKind),
]

#: Messages of a fixed vocabulary by full name: well-known types and tensorwire.v1.
MESSAGE_ELEMENTS: dict[str, Callable[[Descriptor], Element]] = {
    "google.protobuf.Timestamp": lambda d: Timestamp(),
    "google.protobuf.Duration": lambda d: Duration(),
    "google.protobuf.Struct": lambda d: Struct(),
    "google.protobuf.Value": lambda d: Value(),
    "google.protobuf.ListValue": lambda d: ListValue(),
    "tensorwire.v1.Tensor": lambda d: TensorElement(),
    "tensorwire.v1.File": lambda d: FileElement(),
    "tensorwire.v1.DataFrame": lambda d: FrameElement(),
}


# ---------------------------------------------------------------------- HTTP


def schema_kind(schema: dict[str, Any] | bool | None) -> JsonKind:
    """The kind of one JSON Schema node of the contract."""
    if not isinstance(schema, dict):
        return JsonKind({})
    for matches, build in SCHEMA_FAMILIES:
        if matches(schema):
            return build(schema)
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list) and alternatives:
        return _alternatives(schema, alternatives)
    kind = schema.get("type")
    if kind == "string":
        fmt = schema.get("format")
        if fmt == "date-time":
            return DateTimeKind(schema)
        if fmt == "duration":
            return DurationKind(schema)
        if fmt == "binary":
            return BytesKind(schema)
        if fmt is None and "enum" not in schema and "const" not in schema:
            return TextKind(schema)
        return JsonKind(schema)
    if kind == "array" and isinstance(schema.get("items"), dict) and "prefixItems" not in schema:
        item = schema_kind(schema["items"])
        return JsonKind(schema) if item.trivial and not item.is_file else ListKind(schema, item)
    if kind == "object":
        props = schema.get("properties")
        if isinstance(props, dict) and props:
            kinds = {k: schema_kind(v) for k, v in props.items()}
            if all(k.trivial for k in kinds.values()):
                return JsonKind(schema)
            return ObjectKind(schema, kinds)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            value = schema_kind(extra)
            return JsonKind(schema) if value.trivial else MapKind(schema, value)
    return JsonKind(schema)


def _alternatives(schema: dict[str, Any], alternatives: list[Any]) -> JsonKind:
    rest = [a for a in alternatives if not (isinstance(a, dict) and a.get("type") == "null")]
    outer = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    if len(rest) == 1:
        inner = schema_kind({**outer, **rest[0]} if isinstance(rest[0], dict) else rest[0])
        if len(rest) == len(alternatives):
            return inner
        return OptionalKind(schema, inner)
    branches = [(a, schema_kind(a)) for a in rest if isinstance(a, dict)]
    if all(k.trivial for _, k in branches):
        return JsonKind(schema)
    union: JsonKind = UnionKind(schema, branches)
    return OptionalKind(schema, union) if len(rest) < len(alternatives) else union


# ---------------------------------------------------------------------- gRPC


def field_kind(fd: FieldDescriptor) -> FieldKind:
    """The kind of one field (a request input, a response output, a model field)."""
    repeated = _is_repeated(fd)
    if repeated and fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        entry = fd.message_type
        key_fd, value_fd = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return FieldKind(fd, element_of(value_fd, options_of=fd), repeated=True,
                         key=element_of(key_fd))
    return FieldKind(fd, element_of(fd), repeated=repeated)


def element_of(fd: FieldDescriptor, options_of: FieldDescriptor | None = None) -> Element:
    """The element of a field; `options_of` is the field whose tensorwire options apply
    (a map field's, for the value of its entries)."""
    holder = options_of or fd
    hints = v1.field_hints(holder.GetOptions()) if holder.has_options else None
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return Enum(fd.enum_type)
    if fd.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_GROUP):
        element = message_element(fd.message_type)
        return element.hinted(hints) if hints is not None else element
    if hints is not None and hints.json_schema is not None \
            and fd.type == FieldDescriptor.TYPE_STRING:
        return JsonText(hints.json_schema)
    return Scalar(fd.type)


def message_element(desc: Descriptor) -> Element:
    build = MESSAGE_ELEMENTS.get(desc.full_name)
    return build(desc) if build is not None else Model(desc, field_kind)


def _is_repeated(fd: FieldDescriptor) -> bool:
    flag = getattr(fd, "is_repeated", None)
    if isinstance(flag, bool):
        return flag
    return fd.label == FieldDescriptor.LABEL_REPEATED
