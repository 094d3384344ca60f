"""Codecs of standard Python and pydantic types: scalars, enums, containers, models.

Validation of these types is pydantic's own (constraints stay in the annotation); the
codecs here only say how each one sits in protobuf and in a raw HTTP body.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import re
from collections.abc import Callable
from typing import Any, ClassVar

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from .base import (
    BOOL,
    BYTES,
    DOUBLE,
    INT64,
    MISSING,
    STRING,
    Codec,
    FieldError,
    HttpBody,
    JsonText,
    MessageSink,
    Part,
    ProtoBuilder,
    ProtoType,
    UnsupportedBody,
    is_json_media,
)
from .wellknown import (
    datetime_to_timestamp,
    duration_to_timedelta,
    python_to_struct,
    python_to_value,
    struct_to_python,
    timedelta_to_duration,
    timestamp_to_datetime,
    value_to_python,
)

# ---------------------------------------------------------------------- scalars


def _instances_of(python_type: Any) -> Any:
    """What `output_value` passes unchecked for a type: its instances if it is a plain
    class, else nothing (a Literal or a generic alias validates every value)."""
    return python_type if isinstance(python_type, type) else ()


class ScalarCodec(Codec):
    """str, int, float, bool, bytes: one protobuf scalar each."""

    _PROTO: ClassVar[dict[type, ProtoType]] = {
        str: STRING, int: INT64, float: DOUBLE, bool: BOOL, bytes: BYTES,
    }
    validates_output = True

    def __init__(self, python_type: type, annotation: Any, base: type) -> None:
        super().__init__(python_type, annotation)
        self.base = base
        self.output_types = _instances_of(python_type)  # type: ignore[misc]

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return self._PROTO[self.base]

    def to_proto(self, value: Any) -> Any:
        return self.base(value)


class StrCodec(ScalarCodec):
    """`str`: a root str input is the text body; a str output is text/plain."""

    body_media = "text/plain"
    output_media = "text/plain"

    async def decode_body(self, body: Part, ctx: Any) -> Any:
        media_type = body.media_type
        if is_json_media(media_type):
            return await super().decode_body(body, ctx)
        if media_type is not None and not (
            media_type.startswith("text/") or media_type == "application/x-www-form-urlencoded"
        ):
            raise UnsupportedBody(media_type, "text/plain")
        data = await body.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FieldError(f"the body is not UTF-8 text: {exc.reason}") from None

    async def decode_part(self, part: Part, ctx: Any) -> Any:
        """A str form field is its text (what HTML forms, curl -F and Swagger UI send);
        a part labelled application/json is a JSON string like any other JSON part.

        A part with no media type that holds exactly one JSON string literal is read as
        JSON: that is how BentoML's client (and others that JSON-encode every non-file
        field) send text. Send `text/plain` to pass such quotes through verbatim.
        """
        if is_json_media(part.media_type):
            return await super().decode_part(part, ctx)
        data = await part.read()
        if part.media_type is None and _is_json_string(data):
            return JsonText(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FieldError(f"the part is not UTF-8 text: {exc.reason}") from None

    def encode_http(self, value: Any, accept: str | None) -> HttpBody:
        return HttpBody(str(self.output_value(value)).encode(), "text/plain; charset=utf-8")

    def encode_chunk(self, value: Any) -> bytes:
        return str(self.output_value(value)).encode()


def _is_json_string(data: bytes) -> bool:
    text = data.strip()
    if len(text) < 2 or text[:1] != b'"' or text[-1:] != b'"':
        return False
    import orjson

    try:
        return isinstance(orjson.loads(text), str)
    except orjson.JSONDecodeError:
        return False


class BytesCodec(ScalarCodec):
    """`bytes`: base64 in JSON, `bytes` in protobuf, the raw body as a root input.

    With `Annotated[bytes, ContentType(...)]` the value is a binary of that media type:
    a root body or file part of another type is refused (415), and an output is a raw
    body of the declared type (sniffed from the bytes where the pattern is a wildcard).
    Over gRPC a bytes field carries no media type: a value whose bytes plainly show
    another format is refused, others pass.
    """

    body_media = "application/octet-stream"
    output_media = "application/octet-stream"

    def __init__(self, python_type: type, annotation: Any, base: type,
                 content_type: Any = None) -> None:
        super().__init__(python_type, annotation, base)
        self.content_type = content_type
        # Any bytes-like value is written as bytes(value) on both protocols.
        self.output_types = (bytes, bytearray, memoryview)  # type: ignore[misc]
        if content_type is not None:
            from .media import canonical

            pattern = content_type.pattern
            self.declared = canonical(pattern) if not any(c in pattern for c in "*?[,") \
                else None
            self.body_media = pattern  # type: ignore[misc]
            self.output_media = self.declared or pattern  # type: ignore[misc]

    def _check(self, data: bytes, claimed: str | None, filename: str | None = None) -> None:
        from .files import check_media
        from .media import SNIFF_BYTES, resolve_media_type

        media_type = resolve_media_type(data[:SNIFF_BYTES], claimed, filename)
        check_media(self.content_type, media_type, claimed)

    async def decode_body(self, body: Part, ctx: Any) -> Any:
        if self.content_type is None and is_json_media(body.media_type):
            return await super().decode_body(body, ctx)
        data = await body.read()
        if self.content_type is not None:
            self._check(data, body.media_type, body.filename)
        return data

    async def decode_part(self, part: Part, ctx: Any) -> Any:
        # A file part is the raw bytes; a JSON part (no filename) is base64 in JSON.
        if self.content_type is None and part.filename is None and is_json_media(
                part.media_type):
            return await super().decode_part(part, ctx)
        data = await part.read()
        if self.content_type is not None:
            self._check(data, part.media_type, part.filename)
        return data

    def from_proto(self, raw: Any) -> Any:
        if self.content_type is not None and raw:
            from .files import unsupported_to_field_error
            from .media import SNIFF_BYTES, sniff

            sniffed = sniff(raw[:SNIFF_BYTES])
            if sniffed is not None and sniffed != "text/plain":
                try:
                    self._check(raw, sniffed)
                except UnsupportedBody as exc:
                    raise unsupported_to_field_error(exc) from None
        return raw

    def media_type_of(self, value: bytes) -> str:
        if self.content_type is None:
            return "application/octet-stream"
        if self.declared:
            return self.declared
        from .media import SNIFF_BYTES, resolve_media_type

        return resolve_media_type(value[:SNIFF_BYTES])

    def encode_http(self, value: Any, accept: str | None) -> HttpBody:
        data = bytes(self.output_value(value))
        return HttpBody(data, self.media_type_of(data))


class EnumCodec(Codec):
    """`enum.Enum` and `Literal[...]` of strings: a protobuf enum numbered from 1.

    Number 0 is the proto3 "unspecified" value and reads as a missing field.
    """

    validates_output = True

    def __init__(self, python_type: Any, annotation: Any, values: list[Any],
                 labels: list[str], key: Any, name: str | None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = _instances_of(python_type)  # type: ignore[misc]
        self.values = values
        self.labels = labels
        self.key = key
        self.name = name
        self._numbers = {self._hashable(v): i for i, v in enumerate(values, start=1)}

    @staticmethod
    def _hashable(value: Any) -> Any:
        return value.value if isinstance(value, enum.Enum) else value

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return ProtoType.enum(builder.enum(self.key, self.name or name_hint, self.labels))

    def from_proto(self, raw: Any) -> Any:
        if raw == 0:
            return MISSING
        if not 1 <= raw <= len(self.values):
            raise FieldError(f"unknown enum number {raw}", type="enum")
        return self.values[raw - 1]

    def read_field(self, msg: Any, name: str) -> Any:
        if not msg.HasField(name):
            return MISSING
        return self.from_proto(getattr(msg, name))

    def to_proto(self, value: Any) -> Any:
        try:
            return self._numbers[self._hashable(value)]
        except KeyError:
            raise FieldError(f"{value!r} is not one of the enum's values") from None


def enum_value_names(prefix: str, labels: list[str]) -> list[str]:
    """Proto enum value names: C++ scoping makes them package-global, so prefix them."""
    out: list[str] = []
    for label in labels:
        name = f"{prefix}_{re.sub(r'[^0-9A-Za-z]+', '_', label).strip('_').upper() or 'VALUE'}"
        while name in out:
            name += "_"
        out.append(name)
    return out


def upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def enum_codec(tp: type[enum.Enum], annotation: Any) -> EnumCodec:
    members = list(tp)
    return EnumCodec(tp, annotation, members, [m.name for m in members],
                     key=tp, name=tp.__name__)


def literal_codec(values: tuple[Any, ...], annotation: Any) -> Codec:
    if all(isinstance(v, str) for v in values):
        return EnumCodec(annotation, annotation, list(values), list(values),
                         key=("literal", values), name=None)
    if all(isinstance(v, bool) for v in values):
        return ScalarCodec(annotation, annotation, bool)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return ScalarCodec(annotation, annotation, int)
    return JsonValueCodec(annotation, annotation)


# ---------------------------------------------------------------------- time


class DatetimeCodec(Codec):
    """`datetime`: RFC 3339 in JSON, `google.protobuf.Timestamp` (UTC) in protobuf."""

    element_is_message = True
    validates_output = True
    output_types = dt.datetime

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return ProtoType.message(builder.well_known("google.protobuf.Timestamp"))

    def from_proto(self, raw: Any) -> Any:
        return timestamp_to_datetime(raw)

    def fill_proto(self, value: Any, msg: Any) -> None:
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        datetime_to_timestamp(value, msg)


class TimedeltaCodec(Codec):
    """`timedelta`: ISO 8601 duration in JSON, `google.protobuf.Duration` in protobuf."""

    element_is_message = True
    validates_output = True
    output_types = dt.timedelta

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return ProtoType.message(builder.well_known("google.protobuf.Duration"))

    def from_proto(self, raw: Any) -> Any:
        return duration_to_timedelta(raw)

    def fill_proto(self, value: Any, msg: Any) -> None:
        timedelta_to_duration(value, msg)


class StringFormCodec(Codec):
    """Types pydantic writes as a JSON string (date, UUID, Decimal, URLs, e-mail, ...).

    In protobuf they are a `string` holding exactly their JSON form, so both protocols
    validate the same text with the same pydantic rules.
    """

    validates_output = True

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = _instances_of(python_type)  # type: ignore[misc]

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return STRING

    def to_proto(self, value: Any) -> Any:
        return self.adapter.dump_python(value, mode="json", warnings=False)


class JsonValueCodec(Codec):
    """`Any`, and every type with no direct protobuf form: `google.protobuf.Value`.

    The Value holds the type's JSON form, so validation is the same as over HTTP.
    """

    element_is_message = True
    validates_output = True
    _WKT: ClassVar[str] = "google.protobuf.Value"

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = (  # type: ignore[misc]
            object if python_type is Any or python_type is object
            else _instances_of(python_type))

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return ProtoType.message(builder.well_known(self._WKT))

    def from_proto(self, raw: Any) -> Any:
        return value_to_python(raw)

    def fill_proto(self, value: Any, msg: Any) -> None:
        python_to_value(self.adapter.dump_python(value, mode="json", warnings=False), msg)


class StructCodec(JsonValueCodec):
    """Untyped `dict` / `dict[str, Any]`: `google.protobuf.Struct`."""

    _WKT = "google.protobuf.Struct"

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = dict  # type: ignore[misc]

    def from_proto(self, raw: Any) -> Any:
        return struct_to_python(raw)

    def fill_proto(self, value: Any, msg: Any) -> None:
        python_to_struct(self.adapter.dump_python(value, mode="json", warnings=False), msg)


# ---------------------------------------------------------------------- containers


class _ListBatching:
    """Batching of Python lists: items along dimension 0."""

    supports_batching = True

    def batch_len(self, value: Any, dim: int) -> int:
        if dim != 0:
            raise FieldError(f"a list batches along dimension 0, not {dim}")
        return len(value)

    def batch_concat(self, values: list[Any], dim: int) -> Any:
        return [item for value in values for item in value]

    def batch_split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        out, start = [], 0
        for n in sizes:
            out.append(list(value[start:start + n]))
            start += n
        return out


class JsonListCodec(_ListBatching, JsonValueCodec):
    """Nested lists (`list[list[float]]`): a `google.protobuf.Value`, batched as a list."""




class OptionalCodec(Codec):
    """`X | None`: the inner codec, with None meaning "field not set"."""

    def __init__(self, python_type: Any, annotation: Any, inner: Codec) -> None:
        super().__init__(python_type, annotation)
        self.inner = inner
        self.element_is_message = inner.element_is_message  # type: ignore[misc]
        self.is_container = inner.is_container  # type: ignore[misc]
        self.is_file = inner.is_file  # type: ignore[misc]
        self.repeated_parts = inner.repeated_parts  # type: ignore[misc]
        self.has_tensors = inner.has_tensors  # type: ignore[misc]
        self.body_media = inner.body_media  # type: ignore[misc]
        self.output_media = inner.output_media  # type: ignore[misc]
        self.raw_bytes_field = inner.raw_bytes_field  # type: ignore[misc]
        self.binary_media = inner.binary_media  # type: ignore[misc]
        self.validates_output = inner.validates_output  # type: ignore[misc]

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return self.inner.proto_type(builder, name_hint)

    def from_proto(self, raw: Any) -> Any:
        return self.inner.from_proto(raw)

    def to_proto(self, value: Any) -> Any:
        return self.inner.to_proto(value)

    def fill_proto(self, value: Any, msg: Any) -> None:
        self.inner.fill_proto(value, msg)

    def fill_proto_split(self, value: Any, msg: Any) -> Any | None:
        return self.inner.fill_proto_split(value, msg)

    def from_proto_split(self, raw: Any, data: Any) -> Any:
        return self.inner.from_proto_split(raw, data)

    def read_field(self, msg: Any, name: str) -> Any:
        value = self.inner.read_field(msg, name)
        # An empty repeated field cannot be told from an unset one: it reads as None.
        if self.inner.is_container and not value:
            return MISSING
        return value

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is not None:
            self.inner.write_field(msg, name, value)

    def output_value(self, value: Any) -> Any:
        return None if value is None else self.inner.output_value(value)

    async def decode_body(self, body: Part, ctx: Any) -> Any:
        return await self.inner.decode_body(body, ctx)

    async def decode_part(self, part: Part, ctx: Any) -> Any:
        return await self.inner.decode_part(part, ctx)

    def encode_http(self, value: Any, accept: str | None) -> HttpBody:
        if value is None:
            return HttpBody(b"null", "application/json")
        return self.inner.encode_http(value, accept)

    def iter_tensors(self, value: Any) -> list[Any]:
        return [] if value is None else self.inner.iter_tensors(value)


class ListCodec(Codec):
    """`list[X]` (also tuple/set/frozenset of one type): `repeated X`.

    Nested containers (`list[list[int]]`) have no protobuf form: they travel as a
    `google.protobuf.Value` holding their JSON form.
    """

    is_container = True

    def __init__(self, python_type: Any, annotation: Any, item: Codec) -> None:
        super().__init__(python_type, annotation)
        self.item = item
        self.is_file = item.is_file  # type: ignore[misc]
        self.has_tensors = item.has_tensors  # type: ignore[misc]
        # Items of a standard type: every output list is validated (in pydantic's core,
        # cheaper than a Python loop of isinstance checks).
        self.validates_output = item.validates_output  # type: ignore[misc]

    @property
    def repeated_parts(self) -> bool:  # type: ignore[override]
        return self.item.is_file

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        return self.item.proto_type(builder, name_hint).as_repeated()

    async def decode_part(self, part: Part, ctx: Any) -> Any:
        if self.item.is_file:
            return await self.item.decode_part(part, ctx)
        return await super().decode_part(part, ctx)

    @property
    def output_media(self) -> str:  # type: ignore[override]
        return "multipart/form-data" if self.item.is_file else "application/json"

    def encode_http(self, value: Any, accept: str | None) -> HttpBody:
        """A list of files is a multipart/form-data response, one `result` part each."""
        if not self.item.is_file:
            return super().encode_http(value, accept)
        from .multipart import encode_parts, field_parts

        return encode_parts(field_parts("result", self, value, accept))

    def read_field(self, msg: Any, name: str) -> Any:
        out = []
        from_proto = self.item.from_proto
        for i, raw in enumerate(getattr(msg, name)):
            try:
                out.append(from_proto(raw))
            except FieldError as exc:
                raise exc.under(i) from None
        return out

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is None:
            return
        container = getattr(msg, name)
        if self.item.element_is_message:
            fill = self.item.fill_proto
            for v in value:
                fill(v, container.add())
        else:
            to_proto = self.item.to_proto
            container.extend([to_proto(v) for v in value])

    def iter_tensors(self, value: Any) -> list[Any]:
        if not self.has_tensors or value is None:
            return []
        return [t for v in value for t in self.item.iter_tensors(v)]

    batch_len = _ListBatching.batch_len
    batch_concat = _ListBatching.batch_concat
    batch_split = _ListBatching.batch_split
    supports_batching = True


class MapCodec(Codec):
    """`dict[K, V]` with scalar keys: `map<K, V>`."""

    is_container = True

    def __init__(self, python_type: Any, annotation: Any, key: Codec, value: Codec) -> None:
        super().__init__(python_type, annotation)
        self.key = key
        self.value = value
        self.has_tensors = value.has_tensors  # type: ignore[misc]
        self.validates_output = value.validates_output  # type: ignore[misc]

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        vt = self.value.proto_type(builder, name_hint + "Value")
        kt = self.key.proto_type(builder, name_hint + "Key")
        return ProtoType(FDP.TYPE_MESSAGE, None, repeated=True, map_key=kt, map_value=vt)

    def read_field(self, msg: Any, name: str) -> Any:
        out = {}
        from_proto = self.value.from_proto
        for k, raw in getattr(msg, name).items():
            try:
                out[k] = from_proto(raw)
            except FieldError as exc:
                raise exc.under(k) from None
        return out

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is None:
            return
        container = getattr(msg, name)
        if self.value.element_is_message:
            for k, v in value.items():
                self.value.fill_proto(v, container[self.key.to_proto(k)])
        else:
            for k, v in value.items():
                container[self.key.to_proto(k)] = self.value.to_proto(v)

    def iter_tensors(self, value: Any) -> list[Any]:
        if not self.has_tensors or value is None:
            return []
        return [t for v in value.values() for t in self.value.iter_tensors(v)]


# ---------------------------------------------------------------------- unions


class UnionCodec(Codec):
    """A discriminated union of models: a message holding `oneof choice { A a; B b; }`.

    The oneof already says which variant was sent, so a gRPC client need not repeat the
    discriminator field; it is filled in before pydantic validates the variant.
    """

    element_is_message = True
    validates_output = True

    def __init__(self, python_type: Any, members: list[type], discriminator: str,
                 resolve: Callable[[Any], Codec]) -> None:
        super().__init__(python_type, python_type)
        self.members = members
        self.discriminator = discriminator
        self._resolve = resolve
        self.names = [upper_snake(m.__name__).lower() for m in members]
        self.tags = [_literal_tag(m, discriminator) for m in members]
        self.output_types = tuple(members)  # type: ignore[misc]

    @functools.cached_property
    def codecs(self) -> list[Codec]:
        return [self._resolve(m) for m in self.members]

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        def fill(sink: MessageSink) -> None:
            sink.add_oneof("choice", [(n, c, None, None)
                                      for n, c in zip(self.names, self.codecs, strict=True)])

        hint = "Or".join(m.__name__ for m in self.members)
        key = ("union", tuple(self.members), self.discriminator)
        return ProtoType.message(builder.message(key, hint, fill))

    def from_proto(self, raw: Any) -> Any:
        which = raw.WhichOneof("choice")
        if which is None:
            raise FieldError("no variant of the union is set", type="union_tag_not_found")
        i = self.names.index(which)
        value = self.codecs[i].from_proto(getattr(raw, which))
        value.setdefault(self.discriminator, self.tags[i])
        return value

    def fill_proto(self, value: Any, msg: Any) -> None:
        tag = value.get(self.discriminator) if isinstance(value, dict) else getattr(
            value, self.discriminator, None)
        tag = tag.value if isinstance(tag, enum.Enum) else tag
        try:
            i = self.tags.index(tag)
        except ValueError:
            raise FieldError(f"{tag!r} is not a variant of the union") from None
        self.codecs[i].fill_proto(value, getattr(msg, self.names[i]))


def _literal_tag(model: type, discriminator: str) -> Any:
    from typing import get_args

    field = model.model_fields.get(discriminator)
    if field is None:
        raise TypeError(f"{model.__name__} has no discriminator field {discriminator!r}")
    args = get_args(field.annotation)
    if len(args) != 1:
        raise TypeError(f"{model.__name__}.{discriminator} must be a Literal of one value")
    tag = args[0]
    return tag.value if isinstance(tag, enum.Enum) else tag


# ---------------------------------------------------------------------- models


class ModelField:
    """One field of a model message: its name on each wire and its codec."""

    __slots__ = ("codec", "doc", "empty_is_missing", "key", "name", "number")

    def __init__(self, name: str, key: str, codec: Codec, number: int | None,
                 doc: str | None, has_default: bool = False) -> None:
        self.name = name  # Python attribute and protobuf field name
        self.key = key  # the name pydantic validates by (an alias, if any)
        self.codec = codec
        self.number = number
        # proto3 has no presence for repeated/map fields: empty reads as "not sent" where
        # the field has a default (as for an API's own inputs, see protogen)
        self.empty_is_missing = has_default and codec.is_container
        self.doc = doc


class ModelCodec(Codec):
    """A pydantic model (and `IODescriptor`): a JSON object and a nested message."""

    element_is_message = True
    validates_output = True

    def __init__(self, model: type, resolve: Callable[[Any], Codec]) -> None:
        super().__init__(model, model)
        self._resolve = resolve
        self.output_types = model  # type: ignore[misc]

    @functools.cached_property
    def fields(self) -> list[ModelField]:
        from .validators import FieldNumber

        out = []
        for name, info in self.python_type.model_fields.items():
            annotation = info.rebuild_annotation()
            if isinstance(getattr(info, "discriminator", None), str):
                from typing import Annotated

                from pydantic import Field

                annotation = Annotated[annotation, Field(discriminator=info.discriminator)]
            try:
                codec = self._resolve(annotation)
            except TypeError as exc:
                raise TypeError(f"{self.python_type.__qualname__}.{name}: {exc}") from None
            number = next((m.number for m in info.metadata if isinstance(m, FieldNumber)), None)
            key = info.alias if isinstance(info.alias, str) else name
            out.append(ModelField(name, key, codec, number, info.description,
                                  not info.is_required()))
        return out

    # Cached: the runtime asks `has_tensors` of every response (is there a device
    # tensor to move?), and the answer is fixed once the fields are.
    @functools.cached_property
    def is_file(self) -> bool:  # type: ignore[override]
        return any(f.codec.is_file for f in self.fields)

    @functools.cached_property
    def has_tensors(self) -> bool:  # type: ignore[override]
        return any(f.codec.has_tensors for f in self.fields)

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        model = self.python_type

        def fill(sink: MessageSink) -> None:
            sink.add_fields([(f.name, f.codec, f.number, f.doc) for f in self.fields])

        doc = (model.__doc__ or "").strip() or None
        if doc and doc.startswith(("Usage docs:", "!!! abstract")):
            doc = None  # pydantic's own BaseModel docstring, inherited
        return ProtoType.message(builder.message(model, model.__name__, fill, doc=doc))

    def from_proto(self, raw: Any) -> Any:
        from ..context import current_context

        # A server decoding a request (inside Context.active()) reads an empty repeated/map
        # field with a default as not sent; an answer read by a client keeps it empty.
        inputs = current_context() is not None
        out: dict[str, Any] = {}
        for f in self.fields:
            try:
                value = f.codec.read_field(raw, f.name)
            except FieldError as exc:
                raise exc.under(f.key) from None
            if value is MISSING or (inputs and f.empty_is_missing and not value):
                continue
            out[f.key] = value
        return out

    def fill_proto(self, value: Any, msg: Any) -> None:
        msg.SetInParent()
        get = value.get if isinstance(value, dict) else functools.partial(getattr, value)
        for f in self.fields:
            try:
                f.codec.write_field(msg, f.name, get(f.name, None))
            except FieldError as exc:
                raise exc.under(f.name) from None

    def iter_tensors(self, value: Any) -> list[Any]:
        if not self.has_tensors or value is None:
            return []
        get = value.get if isinstance(value, dict) else functools.partial(getattr, value)
        return [t for f in self.fields for t in f.codec.iter_tensors(get(f.name, None))]

    # ------------------------------------------------------------ batching
    # A model whose every field batches (tensors, lists, frames) batches field by field:
    # a classifier's `Prediction(label=[N], probabilities=[N, 10])` is one batch output,
    # moved to the host in one transfer and split back into one Prediction per request.
    @functools.cached_property
    def supports_batching(self) -> bool:  # type: ignore[override]
        return bool(self.fields) and all(f.codec.supports_batching for f in self.fields)

    @staticmethod
    def _getter(value: Any) -> Callable[[str], Any]:
        return value.get if isinstance(value, dict) else functools.partial(getattr, value)

    def batch_len(self, value: Any, dim: int) -> int:
        get = self._getter(value)
        counts: dict[str, int] = {}
        for f in self.fields:
            try:
                counts[f.key] = f.codec.batch_len(get(f.name), dim)
            except FieldError as exc:
                raise exc.under(f.key) from None
        if len(set(counts.values())) > 1:
            raise FieldError("the fields of a batched model must hold the same number of "
                             "items: " + ", ".join(f"{k}={n}" for k, n in counts.items()),
                             type="batch_mismatch")
        return next(iter(counts.values()))

    def _rebuild(self, like: Any, values: dict[str, Any]) -> Any:
        # model_copy: the fields' own codecs made each value, nothing to re-validate; a
        # dict (an output not yet validated) stays a dict keyed as `iter_tensors` reads it
        if isinstance(like, dict):
            return values
        return like.model_copy(update=values)

    def batch_concat(self, values: list[Any], dim: int) -> Any:
        getters = [self._getter(v) for v in values]
        merged = {f.name: f.codec.batch_concat([get(f.name) for get in getters], dim)
                  for f in self.fields}
        return self._rebuild(values[0], merged)

    def batch_split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        get = self._getter(value)
        pieces = {f.name: f.codec.batch_split(get(f.name), sizes, dim) for f in self.fields}
        return [self._rebuild(value, {name: p[i] for name, p in pieces.items()})
                for i in range(len(sizes))]

    @property
    def output_media(self) -> str:  # type: ignore[override]
        return "multipart/form-data" if self.is_file else "application/json"

    # An output that is no model instance (a dict) is validated into the model before it
    # is written, on both protocols (`output_value`): defaults filled the same, and a bad
    # value a server error (500 / INTERNAL) rather than dumped as it came. A model
    # instance (the hot path) is written as it is.
    def encode_chunk(self, value: Any) -> bytes:
        return self.adapter.dump_json(self.output_value(value))

    def encode_http(self, value: Any, accept: str | None) -> HttpBody:
        """Several binary outputs (or files beside JSON): one multipart/form-data body.

        One part per field, named after it: files and tensors as their codecs encode
        them, every other field as an application/json part. None fields are left out.
        """
        value = self.output_value(value)
        if not self.is_file:
            return HttpBody(self.adapter.dump_json(value), "application/json")
        from .multipart import encode_parts, field_parts

        parts = []
        for f in self.fields:
            parts.extend(field_parts(f.name, f.codec, getattr(value, f.name, None), accept))
        return encode_parts(parts)
