"""Values that travel as their JSON form on every wire: `Any`, untyped dicts, nested lists.

Over HTTP they are JSON; in protobuf a `string` field holding the very same JSON text,
written by the same encoder and parsed by the same parser, so validation and the values
a client gets back are the same on both. The field carries the option
`(tensorwire.v1.json_schema)` with the JSON Schema of the value, so reflection-driven
clients know to parse it and what it holds.

Why not `google.protobuf.Value`/`Struct`: their numbers are doubles, so `{"width": 64}`
came back as `{"width": 64.0}` over gRPC (and integers past 2**53 lost digits), while
JSON keeps 64 apart from 64.0.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP
from pydantic_core import from_json

from .. import v1
from ..wire.field_error import FieldError
from .containers import LIST_BATCHING
from .core import Codec, Scope, instances_of
from .http_facet import HttpFacet
from .jsonschema import inline_refs
from .proto_facet import ProtoBuilder, ProtoFacet, ProtoType
from .v2_facet import Tensor, TensorMeta, V2Facet

#: Keys of a JSON Schema that document rather than constrain: left out of the option.
_DOC_KEYS = frozenset({"title", "description", "examples", "default"})


def schema_text(schema: dict[str, Any]) -> str:
    """A JSON Schema as one compact, deterministic line, its `$defs` inlined and its
    documentation keys dropped (what `(tensorwire.v1.json_schema)` holds)."""

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in _DOC_KEYS}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return json.dumps(strip(inline_refs(schema)), sort_keys=True, separators=(",", ":"))


class JsonTextProto(ProtoFacet):
    """A `string` field holding the value's JSON text (`(tensorwire.v1.json_schema)`)."""

    codec: JsonValueCodec
    reads_as_held = False  # JSON text parsed

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return ProtoType(FDP.TYPE_STRING,
                         options=v1.json_field_options(self.codec.json_schema_text))

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        try:
            return from_json(raw)
        except ValueError as exc:
            raise FieldError(f"the field holds no valid JSON text: {exc}",
                             type="json_invalid") from None

    def to_proto(self, value: Any) -> Any:
        # the same writer as HTTP's: a NaN or infinity is a server error, never `null`
        return self.codec.dump_json(value).decode()




class StructV2(V2Facet):
    """JSON in one BYTES element; as an API's whole output, one output per key, each
    holding its value's JSON (the keys are known only when the value is)."""

    def output_tensors(self) -> list[TensorMeta]:
        return []

    def encode_outputs(self, value: Any) -> list[Tensor]:
        value = self.codec.output_value(value)
        out = []
        for key, item in value.items():
            array, parameters = self.encode_elements([item])
            out.append(Tensor(str(key), array, parameters))
        return out

    def to_element(self, value: Any) -> Any:
        # Called for one value of the dict (encode_outputs) or the whole dict (encode).
        # one value of Any: written as HTTP writes JSON (a NaN is an error, never null)
        return _any_codec().dump_json(value)


class JsonValueCodec(Codec):
    """`Any`, and every type with no direct protobuf form: its JSON form everywhere.

    NaN and infinity have no JSON form: refused in, a server error out (`codecs.finite`),
    on both protocols, since gRPC carries the same JSON text.
    """

    validates_output = True
    unchecked_floats = True

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = (object if python_type is Any or python_type is object
                             else instances_of(python_type))
        self.http = HttpFacet(self)
        self.proto: ProtoFacet = JsonTextProto(self)
        self.v2: V2Facet = V2Facet(self)

    @functools.cached_property
    def json_schema_text(self) -> str:
        """The value's JSON Schema, for the protobuf field option (`{}` where pydantic
        cannot describe the type)."""
        try:
            return schema_text(self.adapter.json_schema())
        except Exception:  # a type pydantic validates but cannot describe
            return "{}"


class StructCodec(JsonValueCodec):
    """Untyped `dict` / `dict[str, Any]`: a JSON object (JSON text in protobuf)."""

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = dict
        self.v2 = StructV2(self)


class JsonListCodec(JsonValueCodec):
    """Nested lists (`list[list[float]]`): JSON text in protobuf, batched as a list."""

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.batch = LIST_BATCHING


@functools.cache
def _any_codec() -> JsonValueCodec:
    """The codec of one `Any` value (a key of a dict output, on the v2 wire)."""
    return JsonValueCodec(Any)
