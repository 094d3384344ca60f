"""What a codec is: the one owner of a family of Python types on every wire.

A codec is built once per annotation, at class-definition time, and answers for its
type: the pydantic annotation that validates it (JSON Schema included), the protobuf
field it becomes, how to read/write that field, how to read it from a raw HTTP body or a
multipart part, and how to write it as an HTTP response. Transports only move bytes and
call these methods; they never look at the Python type.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

if TYPE_CHECKING:
    from pydantic import TypeAdapter


class Part(Protocol):
    """One multipart part as the HTTP transport hands it to a codec (read at most once)."""

    name: str
    filename: str | None
    media_type: str | None
    #: Bytes read from the part so far (for the request's total-size budget).
    consumed: int

    async def read(self) -> bytes: ...

    async def save(self, path: Any) -> int:
        """Stream the part into the file at `path`; returns its size."""
        ...


class _Missing:
    """Marks a field the sender left out (distinct from an explicit None)."""

    _instance: ClassVar[_Missing | None] = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


class FieldError(ValueError):
    """A value that could not be decoded, at a path that grows as nested readers unwind."""

    def __init__(self, msg: str, loc: tuple[str | int, ...] = (), type: str = "value_error"):
        super().__init__(msg)
        self.msg = msg
        self.loc = loc
        self.type = type

    def under(self, *prefix: str | int) -> FieldError:
        self.loc = (*prefix, *self.loc)
        return self


class UnsupportedBody(Exception):
    """A raw body of a media type the codec does not read (HTTP 415)."""

    def __init__(self, media_type: str | None, accepted: str) -> None:
        super().__init__(
            f"unsupported media type {media_type or '(none)'!s}; expected {accepted}"
        )
        self.media_type = media_type
        self.accepted = accepted


@dataclass(frozen=True)
class JsonText:
    """A raw body that is JSON text: validated straight from bytes by pydantic."""

    data: bytes


@dataclass(frozen=True)
class ProtoType:
    """How a value sits in a protobuf field: scalar, enum or message; maybe repeated/map."""

    type: int
    type_name: str | None = None
    repeated: bool = False
    map_key: ProtoType | None = None
    map_value: ProtoType | None = None

    @property
    def is_message(self) -> bool:
        return self.type == FDP.TYPE_MESSAGE

    @property
    def is_container(self) -> bool:
        return self.repeated or self.map_key is not None

    def as_repeated(self) -> ProtoType:
        return ProtoType(self.type, self.type_name, repeated=True)

    @classmethod
    def message(cls, type_name: str) -> ProtoType:
        return cls(FDP.TYPE_MESSAGE, type_name)

    @classmethod
    def enum(cls, type_name: str) -> ProtoType:
        return cls(FDP.TYPE_ENUM, type_name)


# The scalar protobuf types the standard codecs use.
STRING = ProtoType(FDP.TYPE_STRING)
BYTES = ProtoType(FDP.TYPE_BYTES)
INT64 = ProtoType(FDP.TYPE_INT64)
DOUBLE = ProtoType(FDP.TYPE_DOUBLE)
BOOL = ProtoType(FDP.TYPE_BOOL)


class MessageSink(Protocol):
    """Where a model codec declares the fields of its message (see protogen)."""

    def add_fields(self, fields: list[tuple[str, Codec, int | None, str | None]]) -> None:
        """Declare (name, codec, pinned number or None, doc) fields in order."""
        ...

    def add_oneof(self, oneof: str, fields: list[tuple[str, Codec, int | None, str | None]]
                  ) -> None:
        """Declare fields that form one `oneof` (message-typed only)."""
        ...


class ProtoBuilder(Protocol):
    """What protogen offers codecs while it builds one service's .proto file."""

    def message(self, key: Any, name_hint: str, fill: Callable[[MessageSink], None],
                doc: str | None = None) -> str:
        """Declare (once per key) a message; returns its fully-qualified type name."""
        ...

    def enum(self, key: Any, name_hint: str, values: list[str], doc: str | None = None) -> str:
        """Declare (once per key) an enum whose values are numbered from 1; returns its name."""
        ...

    def well_known(self, name: str) -> str:
        """Import a google.protobuf or tensorwire.v1 type by full name; returns its name."""
        ...


@dataclass
class HttpBody:
    """An encoded HTTP response body: bytes, or an async stream of chunks (files, SSE)."""

    content: bytes | AsyncIterator[bytes]
    media_type: str
    headers: Mapping[str, str] = field(default_factory=dict)
    length: int | None = None


class Codec:
    """Base of all codecs. The defaults describe a JSON-valued singular field."""

    #: True when HTTP carries this value as a file (multipart part or raw body).
    is_file: ClassVar[bool] = False
    #: True when each multipart part with this field's name is one item (lists of files).
    repeated_parts: ClassVar[bool] = False
    #: True when values are device tensors that `transfer` should move to the host.
    has_tensors: ClassVar[bool] = False

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        self.python_type = python_type
        #: What the API's pydantic model declares for this value (constraints included).
        self.annotation = python_type if annotation is None else annotation

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.python_type!r})"

    # ----------------------------------------------------------------- pydantic
    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        """A TypeAdapter for this annotation (outputs and root inputs use it)."""
        from pydantic import TypeAdapter

        return TypeAdapter(self.annotation)

    # ----------------------------------------------------------------- protobuf
    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        raise NotImplementedError

    def from_proto(self, raw: Any) -> Any:
        """A Python value (for pydantic to validate) from one proto element."""
        return raw

    def to_proto(self, value: Any) -> Any:
        """The proto scalar for one value (scalar/enum element types)."""
        return value

    def fill_proto(self, value: Any, msg: Any) -> None:
        """Write one value into a message element (message element types)."""
        raise NotImplementedError

    def fill_proto_split(self, value: Any, msg: Any) -> Any | None:
        """`fill_proto`, except that the `raw_bytes_field` is returned, not set.

        The caller appends the returned buffer to the serialised message itself (see
        `tensorwire.protobuf.framing`); None means there is nothing to append.
        """
        self.fill_proto(value, msg)
        return None

    def from_proto_split(self, raw: Any, data: Any) -> Any:
        """`from_proto` for a message whose `raw_bytes_field` arrives separately as `data`."""
        return self.from_proto(raw)

    #: Whether one element is a protobuf message (else a scalar or enum).
    element_is_message: ClassVar[bool] = False
    #: A bytes field of the element message big enough to bypass the protobuf runtime
    #: (`Tensor.data`): written and read without copies through `protowire`.
    raw_bytes_field: ClassVar[str | None] = None
    #: Whether the field is repeated or a map (such a codec cannot nest inside another).
    is_container: ClassVar[bool] = False

    def read_field(self, msg: Any, name: str) -> Any:
        """The value of field `name` of `msg`, or MISSING when the sender left it out.

        Every singular field is declared with explicit presence (proto3 `optional`, or a
        message), so "left out" is told apart from a zero value, as JSON tells it.
        """
        if not msg.HasField(name):
            return MISSING
        return self.from_proto(getattr(msg, name))

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is None:
            return
        if self.element_is_message:
            self.fill_proto(value, getattr(msg, name))
        else:
            setattr(msg, name, self.to_proto(value))

    # ----------------------------------------------------------------- HTTP
    #: Media type this codec reads as a raw (root input) body; JSON text by default.
    body_media: ClassVar[str] = "application/json"
    #: Media type of this codec's HTTP responses (documentation; encode_http decides).
    output_media: ClassVar[str] = "application/json"
    #: Binary media types read as a raw body and written when Accept asks for them,
    #: besides the JSON form (documentation, e.g. `application/x-npy` for tensors).
    binary_media: ClassVar[tuple[str, ...]] = ()

    async def decode_body(self, body: Part, ctx: Any) -> Any:
        """A root input from the raw request body (a Part with the root field's name).

        Returns a Python value for pydantic, or `JsonText` to be validated from bytes.
        `ctx` is the request's Context (its temp_dir receives uploaded files).
        """
        media_type = body.media_type
        if media_type is None or is_json_media(media_type) or media_type in _LENIENT_JSON:
            data = await body.read()
            return JsonText(data) if data.strip() else MISSING
        raise UnsupportedBody(media_type, self.body_media)

    async def decode_part(self, part: Part, ctx: Any) -> Any:
        """A value from one multipart part; non-file fields are JSON-encoded parts."""
        return JsonText(await part.read())

    def encode_http(self, value: Any, accept: str | None) -> HttpBody:
        """An HTTP response body for an output value."""
        return HttpBody(self.adapter.dump_json(self.output_value(value)), "application/json")

    def encode_chunk(self, value: Any) -> bytes:
        """One streamed chunk (SSE `data:`); JSON unless the codec knows better."""
        return self.adapter.dump_json(self.output_value(value))

    # ----------------------------------------------------------------- outputs
    #: Whether `output_value` validates a value not of the declared type (the standard
    #: codecs); a family codec (tensors, files, images, frames) checks as it writes.
    validates_output: ClassVar[bool] = False
    #: What `output_value` passes as it is (isinstance); () validates every value.
    output_types: ClassVar[type | tuple[type, ...]] = ()

    def output_value(self, value: Any) -> Any:
        """An output value as both protocols write it (HTTP encode_*, gRPC responses).

        A value already of the declared type is itself (the hot path: one isinstance
        check); any other is validated through `adapter`, so a dict for a model gets its
        defaults filled the same on HTTP and gRPC, and a value of the wrong type raises
        (a server error: 500 / INTERNAL) instead of being sent as it came.
        """
        if not self.validates_output or isinstance(value, self.output_types):
            return value
        return self.adapter.validate_python(value)

    # ----------------------------------------------------------------- tensors
    def iter_tensors(self, value: Any) -> list[Any]:
        """Device tensors inside `value`, for the one batched device→host transfer."""
        return []

    # ----------------------------------------------------------------- batching
    #: Whether values can be merged along a batch dimension (lists, tensors, frames).
    supports_batching: ClassVar[bool] = False

    def batch_len(self, value: Any, dim: int) -> int:
        """How many items `value` holds along `dim`."""
        raise TypeError(f"{self!r} cannot be batched")

    def batch_concat(self, values: list[Any], dim: int) -> Any:
        """One value holding all of `values`, stacked along `dim`."""
        raise TypeError(f"{self!r} cannot be batched")

    def batch_split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        """`value` cut along `dim` into pieces of `sizes` items (views where possible)."""
        raise TypeError(f"{self!r} cannot be batched")


# curl -d sends form-urlencoded by default; a JSON API reads such a body as JSON text.
_LENIENT_JSON = frozenset({"application/x-www-form-urlencoded", "text/json"})


def is_json_media(media_type: str | None) -> bool:
    if not media_type:
        return False
    return media_type == "application/json" or media_type.endswith("+json")
