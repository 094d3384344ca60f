"""Scalars: str, int, float, bool, bytes, enums and Literals, and string-formed types.

Validation is pydantic's own (constraints stay in the annotation); these codecs say how
each value sits in one protobuf scalar or enum, and how a root `str` or `bytes` input
reads a raw body.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import orjson
from pydantic import AllowInfNan

from ..wire.field_error import FieldError
from ..wire.sse import sse_encoder
from .core import MISSING, Codec, Scope, instances_of
from .finite import finite
from .http_facet import HttpBody, HttpFacet, JsonText, Part, UnsupportedBody, is_json_media
from .jsonvalues import JsonValueCodec
from .media import (
    SNIFF_BYTES,
    canonical,
    check_media,
    resolve_media_type,
    sniff,
    unsupported_to_field_error,
)
from .proto_facet import BOOL, BYTES, DOUBLE, INT64, STRING, ProtoBuilder, ProtoFacet, ProtoType
from .v2_facet import MediaV2, NumberV2, TextV2, V2Facet

_PROTO: dict[type, ProtoType] = {str: STRING, int: INT64, float: DOUBLE, bool: BOOL,
                                 bytes: BYTES}


class ScalarProto(ProtoFacet):
    """One protobuf scalar; values are coerced to the field's Python type on write."""

    #: Whether `to_proto` is the coercion `base(value)` alone, so that an instance of
    #: exactly `base` is written as it is (`verbatim_type`). False where a subclass
    #: checks or converts on write (a double's non-finite rule).
    coerces_to_base: ClassVar[bool] = True

    def __init__(self, codec: Codec, base: type) -> None:
        super().__init__(codec, _PROTO[base])
        self.base = base

    def to_proto(self, value: Any) -> Any:
        return self.base(value)

    def verbatim_type(self) -> type | None:
        # base(value) is value itself for an instance of exactly `base`; output_value
        # passes it when the codec checks no output or `base` is what it accepts as is
        codec = self.codec
        if (not self.coerces_to_base or not codec.output_checked_by_types
                or (codec.validates_output and not isinstance(self.base(), codec.output_types))):
            return None
        return self.base


class DoubleProto(ScalarProto):
    """A `double`: NaN and infinity only where the contract opts in (codecs.finite)."""

    coerces_to_base = False  # a non-finite value is checked

    def __init__(self, codec: Codec, allow_nonfinite: bool) -> None:
        super().__init__(codec, float)
        self.allow_nonfinite = allow_nonfinite

    def to_proto(self, value: Any) -> Any:
        return finite(float(value), self.allow_nonfinite)


class ScalarCodec(Codec):
    """str, int, float, bool, bytes: one protobuf scalar each, a JSON value over HTTP."""

    validates_output = True

    def __init__(self, python_type: Any, annotation: Any, base: type) -> None:
        super().__init__(python_type, annotation)
        self.base = base
        self.output_types = instances_of(python_type)
        self.http = HttpFacet(self)
        self.proto = ScalarProto(self, base)
        self.v2: V2Facet = NumberV2(self, base) if base in (bool, int, float) else TextV2(self)


class FloatCodec(ScalarCodec):
    """`float`: a `double`. NaN and infinity only with `allow_inf_nan` (codecs.finite):
    then the annotation keeps the opt-in, and JSON writes them as "NaN"/"Infinity"."""

    def __init__(self, python_type: Any, allow_nonfinite: bool = False) -> None:
        annotation = Annotated[python_type, AllowInfNan()] if allow_nonfinite else python_type
        super().__init__(python_type, annotation, float)
        self.allow_nonfinite = allow_nonfinite
        self.proto = DoubleProto(self, allow_nonfinite)


class StrHttp(HttpFacet):
    """A root str input is the text body; a str output is text/plain."""

    json_answer = False  # text/plain
    json_chunks = False  # each chunk its text

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, body_media="text/plain", output_media="text/plain")

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        media_type = body.media_type
        if is_json_media(media_type):
            return await super().decode_body(body, scope)
        if media_type is not None and not (
            media_type.startswith("text/") or media_type == "application/x-www-form-urlencoded"
        ):
            raise UnsupportedBody(media_type, "text/plain")
        data = await body.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FieldError(f"the body is not UTF-8 text: {exc.reason}") from None

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        """A str form field is its text (what HTML forms, curl -F and Swagger UI send);
        a part labelled application/json is a JSON string like any other JSON part.

        A part with no media type that holds exactly one JSON string literal is read as
        JSON: that is how BentoML's client (and others that JSON-encode every non-file
        field) send text. Send `text/plain` to pass such quotes through verbatim.
        """
        if is_json_media(part.media_type):
            return await super().decode_part(part, scope)
        data = await part.read()
        if part.media_type is None and _is_json_string(data):
            return JsonText(data)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FieldError(f"the part is not UTF-8 text: {exc.reason}") from None

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        return HttpBody(str(self.codec.output_value(value)).encode(),
                        "text/plain; charset=utf-8")

    def encode_chunk(self, value: Any) -> bytes:
        return str(self.codec.output_value(value)).encode()

    def _str_as_utf8(self) -> bool:
        """Whether a `str` chunk passes the codec unchecked (what a token stream yields)."""
        codec = self.codec
        return codec.output_checked_by_types and (
            not codec.validates_output or isinstance("", codec.output_types))

    def sse_chunk_encoder(self) -> Callable[[Any], bytes]:
        return sse_encoder(self.chunk_encoder(), str if self._str_as_utf8() else None)

    def chunk_encoder(self) -> Callable[[Any], bytes]:
        """`encode_chunk` with its one common case first: a `str` the codec passes
        unchecked (what a token stream yields) is its UTF-8 bytes."""
        if not self._str_as_utf8():
            return self.encode_chunk
        output_value = self.codec.output_value

        def encode(value: Any) -> bytes:
            if type(value) is str:
                return value.encode()
            return str(output_value(value)).encode()

        return encode


class StrCodec(ScalarCodec):
    """`str`: a string field; over HTTP a root input or output is plain text."""

    def __init__(self, python_type: Any, annotation: Any, base: type) -> None:
        super().__init__(python_type, annotation, base)
        self.http = StrHttp(self)


def _is_json_string(data: bytes) -> bool:
    text = data.strip()
    if len(text) < 2 or text[:1] != b'"' or text[-1:] != b'"':
        return False
    try:
        return isinstance(orjson.loads(text), str)
    except orjson.JSONDecodeError:
        return False


class BytesHttp(HttpFacet):
    """Raw bytes as a root body or file part (base64 inside JSON); a raw body out."""

    codec: BytesCodec
    json_answer = False  # the raw bytes

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        codec = self.codec
        if codec.content_type is None and is_json_media(body.media_type):
            return await super().decode_body(body, scope)
        data = await body.read()
        if codec.content_type is not None:
            codec.check(data, body.media_type, body.filename)
        return data

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        # A file part is the raw bytes; a JSON part (no filename) is base64 in JSON.
        codec = self.codec
        if codec.content_type is None and part.filename is None and is_json_media(
                part.media_type):
            return await super().decode_part(part, scope)
        data = await part.read()
        if codec.content_type is not None:
            codec.check(data, part.media_type, part.filename)
        return data

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        data = bytes(self.codec.output_value(value))
        return HttpBody(data, self.codec.media_type_of(data))


class BytesProto(ScalarProto):
    """A `bytes` field; with a ContentType, bytes that plainly show another format are
    refused (gRPC carries no media type, so only what the bytes say can be checked)."""

    codec: BytesCodec
    reads_as_held = False  # checked against a ContentType

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        codec = self.codec
        if codec.content_type is not None and raw:
            sniffed = sniff(raw[:SNIFF_BYTES])
            if sniffed is not None and sniffed != "text/plain":
                try:
                    codec.check(raw, sniffed)
                except UnsupportedBody as exc:
                    raise unsupported_to_field_error(exc) from None
        return raw


class BytesV2(MediaV2):
    """One BYTES element holding the bytes. With a ContentType the bytes are checked
    against it (as a raw body is: the client's `content_type` parameter is its claim)
    and outputs carry their `content_type`."""

    codec: BytesCodec

    def from_element(self, item: Any, parameters: Any, scope: Scope) -> Any:
        data = self.content(item)
        codec = self.codec
        if codec.content_type is not None:
            try:
                codec.check(data, self.claimed(parameters))
            except UnsupportedBody as exc:
                raise unsupported_to_field_error(exc) from None
        return data

    def media_element(self, value: Any) -> tuple[bytes, str | None]:
        data = bytes(self.codec.output_value(value))
        if self.codec.content_type is None:
            return data, None
        return data, self.codec.media_type_of(data)


class BytesCodec(ScalarCodec):
    """`bytes`: base64 in JSON, `bytes` in protobuf, the raw body as a root input.

    With `Annotated[bytes, ContentType(...)]` the value is a binary of that media type:
    a root body or file part of another type is refused (415), and an output is a raw
    body of the declared type (sniffed from the bytes where the pattern is a wildcard).
    """

    def __init__(self, python_type: type, annotation: Any, base: type,
                 content_type: Any = None) -> None:
        super().__init__(python_type, annotation, base)
        self.content_type = content_type
        # Any bytes-like value is written as bytes(value) on both protocols.
        self.output_types = (bytes, bytearray, memoryview)
        self.declared: str | None = None
        media = "application/octet-stream"
        output_media = media
        if content_type is not None:
            pattern = content_type.pattern
            if not any(c in pattern for c in "*?[,"):
                self.declared = canonical(pattern)
            media = pattern
            output_media = self.declared or pattern
        self.http = BytesHttp(self, body_media=media, output_media=output_media)
        self.proto = BytesProto(self, base)
        self.v2 = BytesV2(self, content_type.pattern if content_type is not None else None)

    def check(self, data: bytes, claimed: str | None, filename: str | None = None) -> None:
        """Raise UnsupportedBody when the bytes are not of the declared media type."""
        media_type = resolve_media_type(data[:SNIFF_BYTES], claimed, filename)
        check_media(self.content_type, media_type, claimed)

    def media_type_of(self, value: bytes) -> str:
        if self.content_type is None:
            return "application/octet-stream"
        if self.declared:
            return self.declared
        return resolve_media_type(value[:SNIFF_BYTES])


class EnumProto(ProtoFacet):
    """A protobuf enum numbered from 1; number 0 (proto3's "unspecified") reads as missing.

    Numbers follow declaration order unless the contract says otherwise: a contract
    generated against a published `.proto` keeps the published numbers (see
    `tensorwire.protobuf.lock`), so a field's own enum type decides (`for_field`). Its
    values are listed in declaration order, whatever their numbers.
    """

    codec: EnumCodec
    numbered_by_field = True
    reads_as_held = False  # numbers read as the values they stand for
    writes_as_converted = False  # numbered by the field's own enum type

    def __init__(self, codec: EnumCodec, numbers: list[int] | None = None) -> None:
        super().__init__(codec)
        numbers = numbers or list(range(1, len(codec.values) + 1))
        self.values = dict(zip(numbers, codec.values, strict=True))
        self.numbers = {_hashable(v): n for n, v in self.values.items()}
        self._bound: dict[Any, EnumProto] = {}

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        codec = self.codec
        return ProtoType.enum(builder.enum(codec.key, codec.name or name_hint, codec.labels))

    def for_field(self, field: Any) -> EnumProto:
        enum = field.enum_type
        bound = self._bound.get(enum)
        if bound is None:
            numbers = [v.number for v in enum.values if v.number != 0]
            if numbers == list(self.values) or len(numbers) != len(self.values):
                bound = self  # declaration order (or not this codec's numbering)
            else:
                bound = EnumProto(self.codec, numbers)
            self._bound[enum] = bound
        return bound

    def read_field(self, msg: Any, name: str, scope: Scope) -> Any:
        if not msg.HasField(name):
            return MISSING
        return self.for_field(msg.DESCRIPTOR.fields_by_name[name]).from_proto(
            getattr(msg, name), scope)

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is not None:
            setattr(msg, name,
                    self.for_field(msg.DESCRIPTOR.fields_by_name[name]).to_proto(value))

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        if raw == 0:
            return MISSING
        try:
            return self.values[raw]
        except KeyError:
            raise FieldError(f"unknown enum number {raw}", type="enum") from None

    def to_proto(self, value: Any) -> Any:
        try:
            return self.numbers[_hashable(value)]
        except KeyError:
            raise FieldError(f"{value!r} is not one of the enum's values") from None


def _hashable(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


class EnumCodec(Codec):
    """`enum.Enum` and `Literal[...]` of strings: a JSON value, a protobuf enum."""

    validates_output = True

    def __init__(self, python_type: Any, annotation: Any, values: list[Any],
                 labels: list[str], key: Any, name: str | None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = instances_of(python_type)
        self.values = values
        self.labels = labels
        self.key = key
        self.name = name
        self.http = HttpFacet(self)
        self.proto = EnumProto(self)
        # Enums of strings are their text; others (of numbers, of mixed values) JSON.
        plain = [v.value if isinstance(v, enum.Enum) else v for v in values]
        self.v2 = TextV2(self) if all(isinstance(v, str) for v in plain) else V2Facet(self)


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


class StringFormProto(ProtoFacet):
    """A `string` holding exactly the value's JSON form."""

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, STRING)

    def to_proto(self, value: Any) -> Any:
        return self.codec.adapter.dump_python(value, mode="json", warnings=False)


class StringFormCodec(Codec):
    """Types pydantic writes as a JSON string (date, UUID, Decimal, URLs, e-mail, ...).

    In protobuf they are a `string` holding exactly their JSON form, so both protocols
    validate the same text with the same pydantic rules.
    """

    validates_output = True

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.output_types = instances_of(python_type)
        self.http = HttpFacet(self)
        self.proto = StringFormProto(self)
        self.v2 = TextV2(self)
