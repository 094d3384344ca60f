"""pydantic models (and `tensorwire.IODescriptor`): a JSON object, a nested message.

A model's fields resolve to codecs lazily, the first time they are needed: a model may
refer to itself (`children: list["Node"]`), and its codec is registered before its
fields resolve so that such a reference finds it. What the model holds (files, device
tensors) is answered from its fields once they have resolved; a reference back to the
model adds nothing while that answer is being made.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

from pydantic import Field

from ..validators import FieldNumber
from ..wire.field_error import FieldError
from .core import MISSING, Codec, Scope
from .finite import loosen
from .http_facet import JSON, HttpBody, HttpFacet
from .multipart import encode_parts, field_parts
from .proto_facet import MessageProto, MessageSink, ProtoBuilder, ProtoType
from .v2_facet import Tensor, TensorMeta, V2Facet


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
        # the field has a default (as for an API's own inputs)
        self.empty_is_missing = has_default and codec.is_container
        self.doc = doc


def _getter(value: Any) -> Callable[[str, Any], Any]:
    """Field access for a model instance or a plain dict of its fields."""
    return value.get if isinstance(value, dict) else functools.partial(getattr, value)


class ModelHttp(HttpFacet):
    """A JSON object; a model with file or tensor fields is a multipart response, one
    part per field (files and tensors as their codecs encode them, the rest as JSON)."""

    codec: ModelCodec
    json_answer = False  # with files, multipart (`json_encoder` answers per model)

    @property
    def is_file(self) -> bool:
        return self.codec.holds_files

    @property
    def output_media(self) -> str:
        return "multipart/form-data" if self.is_file else JSON

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        codec = self.codec
        # A dict is validated into the model first (`output_value`), on both protocols:
        # defaults filled the same, and a bad value a server error rather than sent as
        # it came. A model instance (the hot path) is written as it is.
        value = codec.output_value(value)
        if not self.is_file:
            return HttpBody(codec.dump_json(value), JSON)
        parts = []
        for f in codec.fields:
            parts.extend(field_parts(f.name, f.codec, getattr(value, f.name, None), accept))
        return encode_parts(parts)

    def json_encoder(self) -> Callable[[Any], bytes] | None:
        return None if self.is_file else self.plain_json_encoder()


class ModelProto(MessageProto):
    """A nested message with one field per model field."""

    codec: ModelCodec
    #: Whether `fill` writes each model field with its own codec's `write_field` and
    #: does nothing else, so a per-API encoder may build the whole message in one
    #: constructor call where every field is written as converted. A subclass whose
    #: `fill` does more sets it False.
    fills_field_by_field: ClassVar[bool] = True

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        codec = self.codec
        model = codec.python_type

        def fill(sink: MessageSink) -> None:
            sink.add_fields([(f.name, f.codec, f.number, f.doc) for f in codec.fields])

        doc = (model.__doc__ or "").strip() or None
        if doc and doc.startswith(("Usage docs:", "!!! abstract")):
            doc = None  # pydantic's own BaseModel docstring, inherited
        return ProtoType.message(builder.message(model, model.__name__, fill, doc=doc))

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        # A server reading a request reads an empty repeated/map field with a default as
        # not sent; an answer read by a client keeps it empty.
        inputs = scope.reading_request
        out: dict[str, Any] = {}
        for f in self.codec.fields:
            try:
                value = f.codec.proto.read_field(raw, f.name, scope)
            except FieldError as exc:
                raise exc.under(f.key) from None
            if value is MISSING or (inputs and f.empty_is_missing and not value):
                continue
            out[f.key] = value
        return out

    def fill(self, value: Any, msg: Any) -> None:
        msg.SetInParent()
        get = _getter(value)
        for f in self.codec.fields:
            try:
                f.codec.proto.write_field(msg, f.name, get(f.name, None))
            except FieldError as exc:
                raise exc.under(f.name) from None


class ModelBatching:
    """A model whose every field batches (tensors, lists, frames) batches field by field:
    a classifier's `Prediction(label=[N], probabilities=[N, 10])` is one batch output,
    moved to the host in one transfer and split back into one Prediction per request."""

    def __init__(self, codec: ModelCodec) -> None:
        self.codec = codec

    def size(self, value: Any, dim: int) -> int:
        get = _getter(value)
        counts: dict[str, int] = {}
        for f in self.codec.fields:
            batch = f.codec.batch
            assert batch is not None
            try:
                counts[f.key] = batch.size(get(f.name, None), dim)
            except FieldError as exc:
                raise exc.under(f.key) from None
        if len(set(counts.values())) > 1:
            raise FieldError("the fields of a batched model must hold the same number of "
                             "items: " + ", ".join(f"{k}={n}" for k, n in counts.items()),
                             type="batch_mismatch")
        return next(iter(counts.values()))

    @staticmethod
    def _rebuild(like: Any, values: dict[str, Any]) -> Any:
        # model_copy: the fields' own codecs made each value, nothing to re-validate; a
        # dict (an output not yet validated) stays a dict keyed as `iter_tensors` reads it
        if isinstance(like, dict):
            return values
        return like.model_copy(update=values)

    def concat(self, values: list[Any], dim: int) -> Any:
        getters = [_getter(v) for v in values]
        merged = {f.name: f.codec.batch.concat([get(f.name, None) for get in getters], dim)
                  for f in self.codec.fields if f.codec.batch is not None}
        return self._rebuild(values[0], merged)

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        get = _getter(value)
        pieces = {f.name: f.codec.batch.split(get(f.name, None), sizes, dim)
                  for f in self.codec.fields if f.codec.batch is not None}
        return [self._rebuild(value, {name: p[i] for name, p in pieces.items()})
                for i in range(len(sizes))]


class ModelV2(V2Facet):
    """JSON in one BYTES element (an input, a nested field); as an API's whole output,
    one output per field, each in its own codec's form (None fields left out)."""

    codec: ModelCodec

    @property
    def output_unsupported(self) -> str | None:
        for f in self.codec.fields:
            reason = f.codec.v2.unsupported
            if reason is not None:
                return f"field {f.name!r}: {reason}"
        return None

    def output_tensors(self) -> list[TensorMeta]:
        return [t for f in self.codec.fields for t in f.codec.v2.tensors(f.name)]

    def encode_outputs(self, value: Any) -> list[Tensor]:
        value = self.codec.output_value(value)
        out: list[Tensor] = []
        for f in self.codec.fields:
            item = getattr(value, f.name, None)
            if item is not None:
                try:
                    out.extend(f.codec.v2.encode(f.name, item))
                except FieldError as exc:
                    raise exc.under(f.name) from None
        return out


class ModelCodec(Codec):
    """A pydantic model: its fields' codecs, resolved on first use."""

    validates_output = True
    #: The model's own validators and serializers apply inside any schema, whatever
    #: the API's config says: the non-finite rule walks its values (codecs.finite).
    unchecked_floats = True

    def __init__(self, model: type, resolve: Callable[[Any], Codec]) -> None:
        super().__init__(model, model)
        self._resolve = resolve
        self.output_types = model
        self._files: bool | None = None
        self._tensors: bool | None = None
        self.http = ModelHttp(self)
        self.proto = ModelProto(self)
        self.v2 = ModelV2(self)

    @functools.cached_property
    def fields(self) -> list[ModelField]:
        out = []
        loose = self.python_type.model_config.get("allow_inf_nan") is True
        for name, info in self.python_type.model_fields.items():
            annotation = info.rebuild_annotation()
            if loose:  # the model opts all its floats in: so do their protobuf doubles
                annotation = loosen(annotation)
            if isinstance(getattr(info, "discriminator", None), str):
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

    @functools.cached_property
    def batch(self) -> ModelBatching | None:
        """Field by field, when every field batches (read once the fields resolved)."""
        fields = self.fields
        if fields and all(f.codec.batch is not None for f in fields):
            return ModelBatching(self)
        return None

    @property
    def holds_files(self) -> bool:
        """Whether any field is (or holds) a file: HTTP then answers multipart."""
        if self._files is None:
            self._files = False  # a reference back to this model adds nothing
            self._files = any(f.codec.http.is_file for f in self.fields)
        return self._files

    @property
    def has_tensors(self) -> bool:
        # Cached: the runtime asks this of every response (is there a device tensor to
        # move?), and the answer is fixed once the fields are.
        if self._tensors is None:
            self._tensors = False  # a reference back to this model adds nothing
            self._tensors = any(f.codec.has_tensors for f in self.fields)
        return self._tensors

    def iter_tensors(self, value: Any) -> list[Any]:
        if value is None or not self.has_tensors:
            return []
        get = _getter(value)
        return [t for f in self.fields for t in f.codec.iter_tensors(get(f.name, None))]
