"""Values that travel as their JSON form on every wire: `Any`, untyped dicts, nested lists.

Over HTTP they are JSON; in protobuf a `google.protobuf.Value` (or `Struct` for an
untyped dict) holding the very same JSON form, so validation is the same on both.
"""

from __future__ import annotations

from typing import Any

from ..wire.wellknown import python_to_struct, python_to_value, struct_to_python, value_to_python
from .containers import LIST_BATCHING
from .core import Codec, Scope, instances_of
from .http_facet import HttpFacet
from .proto_facet import MessageProto


class JsonValueProto(MessageProto):
    """A `google.protobuf.Value` holding the JSON form."""

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, "google.protobuf.Value")

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return value_to_python(raw)

    def fill(self, value: Any, msg: Any) -> None:
        dumped = self.codec.serializer.to_python(value, mode="json", warnings=False)
        python_to_value(dumped, msg)


class StructProto(MessageProto):
    """A `google.protobuf.Struct` holding the JSON object."""

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, "google.protobuf.Struct")

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return struct_to_python(raw)

    def fill(self, value: Any, msg: Any) -> None:
        dumped = self.codec.serializer.to_python(value, mode="json", warnings=False)
        python_to_struct(dumped, msg)


class JsonValueCodec(Codec):
    """`Any`, and every type with no direct protobuf form: its JSON form everywhere.

    NaN and infinity have no JSON form: refused in, a server error out (`codecs.finite`;
    `google.protobuf.Value` refuses them too, see `wire.wellknown`).
    """

    validates_output = True
    unchecked_floats = True

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = (object if python_type is Any or python_type is object
                             else instances_of(python_type))
        self.http = HttpFacet(self)
        self.proto: MessageProto = JsonValueProto(self)


class StructCodec(JsonValueCodec):
    """Untyped `dict` / `dict[str, Any]`: a JSON object, a `google.protobuf.Struct`."""

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = dict
        self.proto = StructProto(self)


class JsonListCodec(JsonValueCodec):
    """Nested lists (`list[list[float]]`): a `google.protobuf.Value`, batched as a list."""

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.batch = LIST_BATCHING
