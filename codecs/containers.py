"""Wrappers of one codec: `X | None`, `list[X]` (`repeated X`), `dict[K, V]` (`map<K, V>`).

A wrapper answers from what it wraps: its flags and facets delegate to the inner
codec's, read when asked (a model may still be resolving its own fields when a wrapper
of it is built), and add only what the wrapper changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from ..wire.field_error import FieldError
from .core import MISSING, Codec, Scope
from .http_facet import JSON, HttpBody, HttpFacet, Part
from .multipart import encode_parts, field_parts
from .proto_facet import ProtoBuilder, ProtoFacet, ProtoType
from .v2_facet import Tensor, TensorMeta, V2Facet, elements


class ListBatching:
    """Python lists batch along dimension 0: items are concatenated and cut back."""

    def size(self, value: Any, dim: int) -> int:
        if dim != 0:
            raise FieldError(f"a list batches along dimension 0, not {dim}")
        return len(value)

    def concat(self, values: list[Any], dim: int) -> Any:
        return [item for value in values for item in value]

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        out, start = [], 0
        for n in sizes:
            out.append(list(value[start:start + n]))
            start += n
        return out


LIST_BATCHING = ListBatching()


# ---------------------------------------------------------------------- Optional


class OptionalHttp(HttpFacet):
    """The inner facet, except that None is written as JSON `null`."""

    json_answer = False  # None is `null`; any other value as the inner facet writes it

    def __init__(self, codec: Codec, inner: HttpFacet) -> None:
        super().__init__(codec, body_media=inner.body_media, binary_media=inner.binary_media)
        self.inner = inner

    @property
    def output_media(self) -> str:
        return self.inner.output_media

    @property
    def is_file(self) -> bool:
        return self.inner.is_file

    @property
    def repeated_parts(self) -> bool:
        return self.inner.repeated_parts

    @property
    def item(self) -> HttpFacet | None:
        return self.inner.item

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        return await self.inner.decode_body(body, scope)

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        return await self.inner.decode_part(part, scope)

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        if value is None:
            return HttpBody(b"null", JSON)
        return self.inner.encode(value, accept)


class OptionalProto(ProtoFacet):
    """The inner facet; None is "field not set", and so is an empty repeated field."""

    reads_as_held = False  # an empty repeated field reads as None
    writes_as_converted = False  # as the inner facet writes

    def __init__(self, codec: OptionalCodec, inner: ProtoFacet) -> None:
        super().__init__(codec)
        self.inner = inner
        self.raw_bytes_field = inner.raw_bytes_field
        self.element_is_message = inner.element_is_message
        self.numbered_by_field = inner.numbered_by_field
        self._inner_is_container = codec.inner.is_container

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return self.inner.proto_type(builder, name_hint)

    def for_field(self, field: Any) -> ProtoFacet:
        return self.inner.for_field(field)

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return self.inner.from_proto(raw, scope)

    def to_proto(self, value: Any) -> Any:
        return self.inner.to_proto(value)

    def fill(self, value: Any, msg: Any) -> None:
        self.inner.fill(value, msg)

    def fill_split(self, value: Any, msg: Any) -> Any | None:
        return self.inner.fill_split(value, msg)

    def from_split(self, raw: Any, data: Any, scope: Scope) -> Any:
        return self.inner.from_split(raw, data, scope)

    def read_field(self, msg: Any, name: str, scope: Scope) -> Any:
        value = self.inner.read_field(msg, name, scope)
        # An empty repeated field cannot be told from an unset one: it reads as None.
        if self._inner_is_container and not value:
            return MISSING
        return value

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is not None:
            self.inner.write_field(msg, name, value)


class OptionalV2(V2Facet):
    """The inner facet; None is no tensor at all (an input left out, an output not
    sent). Not elementwise: a list of optional values has no tensor form but JSON."""

    elementwise = False

    def __init__(self, codec: OptionalCodec) -> None:
        super().__init__(codec)
        self.inner_codec = codec.inner

    @property
    def inner(self) -> V2Facet:
        return self.inner_codec.v2

    @property
    def unsupported(self) -> str | None:
        return self.inner.unsupported

    @property
    def output_unsupported(self) -> str | None:
        return self.inner.output_unsupported

    def tensors(self, name: str) -> list[TensorMeta]:
        return self.inner.tensors(name)

    def input_names(self, name: str) -> tuple[str, ...] | None:
        return self.inner.input_names(name)

    def output_tensors(self) -> list[TensorMeta]:
        return self.inner.output_tensors()

    def decode(self, name: str, inputs: Mapping[str, Tensor], scope: Scope) -> Any:
        return self.inner.decode(name, inputs, scope)

    def encode(self, name: str, value: Any) -> list[Tensor]:
        return [] if value is None else self.inner.encode(name, value)

    def encode_outputs(self, value: Any) -> list[Tensor]:
        return [] if value is None else self.inner.encode_outputs(value)


class OptionalCodec(Codec):
    """`X | None`: the inner codec, with None meaning "field not set"."""

    output_checked_by_types = False  # None passes; the inner codec checks the rest

    def __init__(self, python_type: Any, annotation: Any, inner: Codec) -> None:
        super().__init__(python_type, annotation)
        self.inner = inner
        self.http = OptionalHttp(self, inner.http)
        self.proto = OptionalProto(self, inner.proto)
        self.v2: V2Facet = OptionalV2(self)

    @property
    def has_tensors(self) -> bool:
        return self.inner.has_tensors

    @property
    def is_container(self) -> bool:
        return self.inner.is_container

    @property
    def unchecked_floats(self) -> bool:
        return self.inner.unchecked_floats

    @property
    def validates_output(self) -> bool:
        return self.inner.validates_output

    def output_value(self, value: Any) -> Any:
        return None if value is None else self.inner.output_value(value)

    def iter_tensors(self, value: Any) -> list[Any]:
        return [] if value is None else self.inner.iter_tensors(value)


# ---------------------------------------------------------------------- list


class ListHttp(HttpFacet):
    """A JSON array; a list of files is one multipart part per item, in and out."""

    codec: ListCodec
    json_answer = False  # a list of files is multipart

    @property
    def is_file(self) -> bool:
        return self.codec.item.http.is_file

    @property
    def repeated_parts(self) -> bool:
        return self.codec.item.http.is_file

    @property
    def item(self) -> HttpFacet | None:
        return self.codec.item.http

    @property
    def output_media(self) -> str:
        return "multipart/form-data" if self.is_file else JSON

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        item = self.codec.item.http
        if item.is_file:
            return await item.decode_part(part, scope)
        return await super().decode_part(part, scope)

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        """A list of files is a multipart/form-data response, one `result` part each."""
        if not self.is_file:
            return super().encode(value, accept)
        return encode_parts(field_parts("result", self.codec, value, accept))


class ListProto(ProtoFacet):
    """`repeated X`: the item's element, once per item."""

    codec: ListCodec
    reads_as_held = False  # each item through its own facet
    writes_as_converted = False

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return self.codec.item.proto.proto_type(builder, name_hint).as_repeated()

    def read_field(self, msg: Any, name: str, scope: Scope) -> Any:
        out = []
        item = self.codec.item.proto
        if item.numbered_by_field:
            item = item.for_field(msg.DESCRIPTOR.fields_by_name[name])
        from_proto = item.from_proto
        for i, raw in enumerate(getattr(msg, name)):
            try:
                out.append(from_proto(raw, scope))
            except FieldError as exc:
                raise exc.under(i) from None
        return out

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is None:
            return
        container = getattr(msg, name)
        item = self.codec.item.proto
        if item.element_is_message:
            for v in value:
                item.fill(v, container.add())
        else:
            if item.numbered_by_field:
                item = item.for_field(msg.DESCRIPTOR.fields_by_name[name])
            to_proto = item.to_proto
            container.extend([to_proto(v) for v in value])


class ListV2(V2Facet):
    """A list of values that are one element each (numbers, text, bytes, files,
    images): one tensor of shape [-1] of the item's datatype. Other items (tensors,
    frames, optional values) make the list its JSON form in one BYTES element."""

    elementwise = False
    codec: ListCodec

    @property
    def item(self) -> V2Facet | None:
        """The item's facet when the list is a tensor of items, else None (JSON)."""
        item = self.codec.item.v2
        return item if item.elementwise and item.unsupported is None else None

    @property
    def datatype(self) -> str:  # type: ignore[override]
        item = self.item
        return "BYTES" if item is None else item.datatype

    @property
    def unsupported(self) -> str | None:
        return None if self.item is not None else super().unsupported

    @property
    def parameters(self) -> Mapping[str, Any]:
        item = self.item
        return super().parameters if item is None else item.parameters

    def tensors(self, name: str) -> list[TensorMeta]:
        if self.item is None:
            return super().tensors(name)
        return [TensorMeta(name, self.datatype, (-1,), self.parameters)]

    def decode(self, name: str, inputs: Mapping[str, Tensor], scope: Scope) -> Any:
        item = self.item
        if item is None:
            return super().decode(name, inputs, scope)
        tensor = inputs[name]
        out = []
        for i, element in enumerate(elements(tensor)):
            try:
                out.append(item.from_element(element, tensor.parameters, scope))
            except FieldError as exc:
                raise exc.under(i) from None
        return out

    def encode(self, name: str, value: Any) -> list[Tensor]:
        item = self.item
        if item is None:
            return super().encode(name, value)
        array, parameters = item.encode_elements(list(self.codec.output_value(value)))
        return [Tensor(name, array, parameters)]


class ListCodec(Codec):
    """`list[X]` (also tuple/set/frozenset of one type): `repeated X`.

    Nested containers (`list[list[int]]`) have no protobuf form: they travel as a
    `google.protobuf.Value` holding their JSON form (see jsonvalues).
    """

    is_container = True
    batch = LIST_BATCHING

    def __init__(self, python_type: Any, annotation: Any, item: Codec) -> None:
        super().__init__(python_type, annotation)
        self.item = item
        self.http = ListHttp(self)
        self.proto = ListProto(self)
        self.v2 = ListV2(self)

    @property
    def has_tensors(self) -> bool:
        return self.item.has_tensors

    @property
    def unchecked_floats(self) -> bool:
        return self.item.unchecked_floats

    @property
    def validates_output(self) -> bool:
        # Items of a standard type: every output list is validated (in pydantic's core,
        # cheaper than a Python loop of isinstance checks).
        return self.item.validates_output

    def iter_tensors(self, value: Any) -> list[Any]:
        if value is None or not self.has_tensors:
            return []
        return [t for v in value for t in self.item.iter_tensors(v)]


# ---------------------------------------------------------------------- map


class MapProto(ProtoFacet):
    """`map<K, V>` with a scalar key."""

    codec: MapCodec
    reads_as_held = False  # each value through its own facet
    writes_as_converted = False

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        codec = self.codec
        vt = codec.value.proto.proto_type(builder, name_hint + "Value")
        kt = codec.key.proto.proto_type(builder, name_hint + "Key")
        return ProtoType(FDP.TYPE_MESSAGE, None, repeated=True, map_key=kt, map_value=vt)

    def read_field(self, msg: Any, name: str, scope: Scope) -> Any:
        out = {}
        from_proto = _map_values(self.codec.value.proto, msg, name).from_proto
        for k, raw in getattr(msg, name).items():
            try:
                out[k] = from_proto(raw, scope)
            except FieldError as exc:
                raise exc.under(k) from None
        return out

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is None:
            return
        container = getattr(msg, name)
        key = self.codec.key.proto.to_proto
        item = _map_values(self.codec.value.proto, msg, name)
        if item.element_is_message:
            for k, v in value.items():
                item.fill(v, container[key(k)])
        else:
            for k, v in value.items():
                container[key(k)] = item.to_proto(v)


def _map_values(facet: ProtoFacet, msg: Any, name: str) -> ProtoFacet:
    """The facet of a map field's values (bound to the entry's value type if needed)."""
    if not facet.numbered_by_field:
        return facet
    return facet.for_field(msg.DESCRIPTOR.fields_by_name[name].message_type
                           .fields_by_name["value"])


class MapV2(V2Facet):
    """JSON in one BYTES element; as an API's whole output, one output per key with
    the value's own form (`dict[str, int]`: an INT64 [1] per key)."""

    codec: MapCodec

    @property
    def output_unsupported(self) -> str | None:
        return self.codec.value.v2.unsupported

    def output_tensors(self) -> list[TensorMeta]:
        return []  # the keys are known only when the value is

    def encode_outputs(self, value: Any) -> list[Tensor]:
        facet = self.codec.value.v2
        value = self.codec.output_value(value)
        return [t for key, item in value.items() for t in facet.encode(str(key), item)]


class MapCodec(Codec):
    """`dict[K, V]` with scalar keys: a JSON object, a `map<K, V>`."""

    is_container = True

    def __init__(self, python_type: Any, annotation: Any, key: Codec, value: Codec) -> None:
        super().__init__(python_type, annotation)
        self.key = key
        self.value = value
        self.http = HttpFacet(self)
        self.proto = MapProto(self)
        self.v2 = MapV2(self)

    @property
    def has_tensors(self) -> bool:
        return self.value.has_tensors

    @property
    def unchecked_floats(self) -> bool:
        return self.value.unchecked_floats

    @property
    def validates_output(self) -> bool:
        return self.value.validates_output

    def iter_tensors(self, value: Any) -> list[Any]:
        if value is None or not self.has_tensors:
            return []
        return [t for v in value.values() for t in self.value.iter_tensors(v)]
