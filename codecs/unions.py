"""Discriminated unions of models: a JSON object with a tag, a protobuf `oneof`."""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any, get_args

from ..naming import upper_snake
from ..wire.field_error import FieldError
from .core import Codec, Scope
from .http_facet import HttpFacet
from .proto_facet import MessageProto, MessageSink, ProtoBuilder, ProtoType
from .v2_facet import V2Facet


class UnionProto(MessageProto):
    """A message holding `oneof choice { A a; B b; }`.

    The oneof already says which variant was sent, so a gRPC client need not repeat the
    discriminator field; it is filled in before pydantic validates the variant.
    """

    codec: UnionCodec

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        codec = self.codec

        def fill(sink: MessageSink) -> None:
            sink.add_oneof("choice", [(n, c, None, None)
                                      for n, c in zip(codec.names, codec.codecs, strict=True)])

        hint = "Or".join(m.__name__ for m in codec.members)
        key = ("union", tuple(codec.members), codec.discriminator)
        return ProtoType.message(builder.message(key, hint, fill))

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        codec = self.codec
        which = raw.WhichOneof("choice")
        if which is None:
            raise FieldError("no variant of the union is set", type="union_tag_not_found")
        i = codec.names.index(which)
        value = codec.codecs[i].proto.from_proto(getattr(raw, which), scope)
        value.setdefault(codec.discriminator, codec.tags[i])
        return value

    def fill(self, value: Any, msg: Any) -> None:
        codec = self.codec
        tag = value.get(codec.discriminator) if isinstance(value, dict) else getattr(
            value, codec.discriminator, None)
        tag = tag.value if isinstance(tag, enum.Enum) else tag
        try:
            i = codec.tags.index(tag)
        except ValueError:
            raise FieldError(f"{tag!r} is not a variant of the union") from None
        codec.codecs[i].proto.fill(value, getattr(msg, codec.names[i]))


class UnionCodec(Codec):
    """A discriminated union of models (`Field(discriminator=...)`)."""

    validates_output = True
    unchecked_floats = True  # models of the user's (codecs.finite)

    def __init__(self, python_type: Any, members: list[type], discriminator: str,
                 resolve: Callable[[Any], Codec]) -> None:
        super().__init__(python_type, python_type)
        self.members = members
        self.discriminator = discriminator
        self._resolve = resolve
        self.names = [upper_snake(m.__name__).lower() for m in members]
        self.tags = [_literal_tag(m, discriminator) for m in members]
        self.output_types = tuple(members)
        self.http = HttpFacet(self)
        self.proto = UnionProto(self)
        self.v2 = V2Facet(self)

    @functools.cached_property
    def codecs(self) -> list[Codec]:
        return [self._resolve(m) for m in self.members]


def _literal_tag(model: type, discriminator: str) -> Any:
    field = model.model_fields.get(discriminator)
    if field is None:
        raise TypeError(f"{model.__name__} has no discriminator field {discriminator!r}")
    args = get_args(field.annotation)
    if len(args) != 1:
        raise TypeError(f"{model.__name__}.{discriminator} must be a Literal of one value")
    tag = args[0]
    return tag.value if isinstance(tag, enum.Enum) else tag
