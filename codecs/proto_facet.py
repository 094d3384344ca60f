"""The protobuf facet of a codec: the field it becomes and how values are read and written.

A value sits in one field of a generated message: a scalar, an enum or a message
element, possibly repeated or a map (`ProtoType`). The base facet is a singular scalar;
`MessageProto` is the base of families whose element is a message (well-known types,
`tensorwire.v1` types, nested models). Big bytes fields (`raw_bytes_field`, the data of
a `tensorwire.v1.Tensor`) can bypass the protobuf runtime: `fill_split` leaves them out
for the caller to append, `from_split` gets them as a view of the received buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from .core import MISSING

if TYPE_CHECKING:
    from .core import Codec, Scope


@dataclass(frozen=True)
class ProtoType:
    """How a value sits in a protobuf field: scalar, enum or message; maybe repeated/map."""

    type: int
    type_name: str | None = None
    repeated: bool = False
    map_key: ProtoType | None = None
    map_value: ProtoType | None = None
    #: Serialised FieldOptions the field carries (tensorwire.v1's dtype, shape,
    #: json_schema): what a client needs beyond the type. A map field takes its value's.
    options: bytes = b""

    @property
    def is_message(self) -> bool:
        return self.type == FDP.TYPE_MESSAGE

    @property
    def is_container(self) -> bool:
        return self.repeated or self.map_key is not None

    def as_repeated(self) -> ProtoType:
        return ProtoType(self.type, self.type_name, repeated=True, options=self.options)

    @classmethod
    def message(cls, type_name: str, options: bytes = b"") -> ProtoType:
        return cls(FDP.TYPE_MESSAGE, type_name, options=options)

    @classmethod
    def enum(cls, type_name: str) -> ProtoType:
        return cls(FDP.TYPE_ENUM, type_name)


# The scalar protobuf types the standard codecs use.
STRING = ProtoType(FDP.TYPE_STRING)
BYTES = ProtoType(FDP.TYPE_BYTES)
INT64 = ProtoType(FDP.TYPE_INT64)
DOUBLE = ProtoType(FDP.TYPE_DOUBLE)
BOOL = ProtoType(FDP.TYPE_BOOL)

#: (name, codec, pinned number or None, doc) of one declared field.
FieldDecl = tuple[str, "Codec", int | None, str | None]


class MessageSink(Protocol):
    """Where a model codec declares the fields of its message (see protobuf.descriptors)."""

    def add_fields(self, fields: list[FieldDecl]) -> None:
        """Declare fields in order."""
        ...

    def add_oneof(self, oneof: str, fields: list[FieldDecl]) -> None:
        """Declare fields that form one `oneof` (message-typed only)."""
        ...


class ProtoBuilder(Protocol):
    """What the descriptor builder offers codecs while it builds one service's file."""

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


class ProtoFacet:
    """How one codec's values sit in protobuf; this base is a singular scalar field.

    What a subclass changes about reading and writing a field is declared in class
    flags (`reads_as_held`, `writes_as_converted`), read once when a per-API reader or
    encoder is built: a subclass that overrides the methods a flag names sets it False
    (a unit test checks that every facet in `tensorwire.codecs` does).
    """

    #: Whether one element is a protobuf message (else a scalar or enum).
    element_is_message = False
    #: Whether element numbers come from the field's protobuf type (`for_field`): an
    #: enum, whose values a published contract may number apart from declaration order.
    numbered_by_field = False
    #: Whether a field reads as the message holds it: MISSING when the sender left it
    #: out, else `getattr(msg, name)` itself, neither converted nor checked (the base
    #: `read_field` and `from_proto`). A per-API reader then takes a request's set
    #: scalar fields in one comprehension. False where a facet converts or checks
    #: elements or reads the field by another rule (containers, enums, JSON text).
    reads_as_held: ClassVar[bool] = True
    #: Whether a field is written by the base rule: None leaves it unset, any other
    #: value sets it to `to_proto(value)` (a message element: `fill`s it). A per-API
    #: encoder then builds a scalar result's message in one constructor call. False
    #: where `write_field` does more (containers, wrappers, enums numbered per field).
    writes_as_converted: ClassVar[bool] = True

    def __init__(self, codec: Codec, ptype: ProtoType | None = None) -> None:
        self.codec = codec
        self._ptype = ptype
        #: A bytes field of the element message big enough to bypass the protobuf
        #: runtime (`Tensor.data`): written and read without copies.
        self.raw_bytes_field: str | None = None

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        if self._ptype is None:
            raise NotImplementedError(f"{self.codec!r} has no protobuf type")
        return self._ptype

    def for_field(self, field: Any) -> ProtoFacet:
        """The facet that reads and writes the elements of protobuf field `field` (a
        FieldDescriptor; of a map, its entry's `value`): this one, except where element
        numbers come from the field's type (`numbered_by_field`). Containers ask once per
        field, not per element."""
        return self

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        """A Python value (for pydantic to validate) from one proto element."""
        return raw

    def to_proto(self, value: Any) -> Any:
        """The proto scalar for one value (scalar and enum elements)."""
        return value

    def verbatim_type(self) -> type | None:
        """A type whose instances, as an output, are written to the field as they are
        (no check, no conversion), for a per-message encoder to skip both; None when
        every value goes through `output_value` and `to_proto`."""
        return None

    def fill(self, value: Any, msg: Any) -> None:
        """Write one value into a message element (message elements)."""
        raise NotImplementedError(f"{self.codec!r} is not a message")

    def fill_split(self, value: Any, msg: Any) -> Any | None:
        """`fill`, except that the `raw_bytes_field` is returned, not set.

        The caller appends the returned buffer to the serialised message itself (see
        `tensorwire.protobuf.bytes_fields`); None means there is nothing to append.
        """
        self.fill(value, msg)
        return None

    def from_split(self, raw: Any, data: Any, scope: Scope) -> Any:
        """`from_proto` for a message whose `raw_bytes_field` arrives apart, as `data`."""
        return self.from_proto(raw, scope)

    def read_field(self, msg: Any, name: str, scope: Scope) -> Any:
        """The value of field `name` of `msg`, or MISSING when the sender left it out.

        Every singular field is declared with explicit presence (proto3 `optional`, or a
        message), so "left out" is told apart from a zero value, as JSON tells it.
        """
        if not msg.HasField(name):
            return MISSING
        return self.from_proto(getattr(msg, name), scope)

    def write_field(self, msg: Any, name: str, value: Any) -> None:
        if value is None:
            return
        if self.element_is_message:
            self.fill(value, getattr(msg, name))
        else:
            setattr(msg, name, self.to_proto(value))


class MessageProto(ProtoFacet):
    """A facet whose element is a message: a well-known type or one of our own."""

    element_is_message = True
    #: A message element is converted to a value (a subclass's `from_proto`), never
    #: handed over as the message it is.
    reads_as_held = False

    def __init__(self, codec: Codec, type_name: str | None = None) -> None:
        super().__init__(codec)
        #: The full name of a fixed message type (`tensorwire.v1.Tensor`), if it is one.
        self.type_name = type_name

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        if self.type_name is None:
            raise NotImplementedError(f"{self.codec!r} declares its own message")
        return ProtoType.message(builder.well_known(self.type_name))
