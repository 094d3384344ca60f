"""The descriptor registry: what one API is, read once from its signature.

Everything else (validation model, JSON Schema, OpenAPI, protobuf messages, routes) is
derived from `APISpec`; nothing about an API is written down twice. Decoding lives here
too, so that every transport validates through the same pydantic model.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ..codecs import MISSING, Codec, FieldError, JsonText, pydantic_annotation
from ..errors import InvalidArgument, UnsupportedMediaType

InputShape = Literal["keywords", "input_spec", "root"]


@dataclass
class FieldSpec:
    """One input field: a parameter (or an `input_spec` model field)."""

    name: str
    annotation: Any
    codec: Codec
    info: FieldInfo
    #: A pinned protobuf field number (`FieldNumber`), else declaration order.
    number: int | None = None
    #: The parameter's kind: "keyword" or "positional" (root input), or "spec".
    kind: str = "keyword"

    @property
    def required(self) -> bool:
        return self.info.is_required()

    @property
    def default(self) -> Any:
        if self.info.is_required():
            return MISSING
        return self.info.get_default(call_default_factory=True)

    @property
    def doc(self) -> str | None:
        return self.info.description


@dataclass
class OutputSpec:
    """What an API returns: one value (or a stream of them) handled by one codec."""

    annotation: Any
    codec: Codec
    #: Generator / AsyncGenerator return: chunks are streamed (SSE, server streaming).
    stream: bool = False
    #: The output is a pydantic model whose fields become the gRPC response's fields.
    model: type[BaseModel] | None = None

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        return TypeAdapter(self.annotation)


@dataclass
class APISpec:
    """One API of a service, as read from its method at class-definition time."""

    name: str
    route: str
    method_name: str
    doc: str | None
    fields: list[FieldSpec]
    input_shape: InputShape
    input_model: type[BaseModel]
    output: OutputSpec
    is_async: bool
    #: Name of the injected `Context` parameter, if the method declares one.
    context_param: str | None = None
    context_positional: bool = False
    batchable: bool = False
    batch_dim: tuple[int, int] = (0, 0)
    max_batch_size: int = 64
    max_latency_ms: float = 10.0
    #: Root-input adapter: the one field's annotation, constraints included.
    root_adapter: TypeAdapter[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ facts
    @property
    def is_root(self) -> bool:
        return self.input_shape == "root"

    @property
    def root_field(self) -> FieldSpec:
        return self.fields[0]

    @functools.cached_property
    def has_files(self) -> bool:
        """Any file/image field: HTTP then takes multipart/form-data."""
        return any(f.codec.is_file for f in self.fields)

    @functools.cached_property
    def field_by_name(self) -> dict[str, FieldSpec]:
        return {f.name: f for f in self.fields}

    # ------------------------------------------------------------------ decoding
    def decode_json(self, body: bytes) -> dict[str, Any]:
        """Validated keyword arguments from a JSON object body, parsed once from bytes."""
        if self.is_root:
            return self.decode_root(JsonText(body))
        try:
            model = self.input_model.model_validate_json(body or b"{}")
        except ValidationError as exc:
            raise invalid_argument(exc) from None
        return self._arguments(model)

    def decode_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments from already-decoded Python values (gRPC, parts).

        A value that is `JsonText` (a multipart JSON part) is parsed by pydantic in JSON
        mode for its own field, exactly as the same field inside a JSON body would be.
        """
        if self.is_root:
            name = self.root_field.name
            value = values.get(name, MISSING)
            return self.decode_root(value)
        try:
            if any(type(v) is JsonText for v in values.values()):
                values = {k: self._json_part(k, v) for k, v in values.items()}
            model = self.input_model.model_validate(values)
        except ValidationError as exc:
            raise invalid_argument(exc) from None
        return self._arguments(model)

    def _json_part(self, name: str, value: Any) -> Any:
        if type(value) is not JsonText:
            return value
        adapter = self._field_adapters.get(name)
        if adapter is None:  # an unknown part: let the model report it as extra
            return value.data
        try:
            return adapter.validate_json(value.data)
        except ValidationError as exc:
            raise invalid_argument(exc, prefix=(name,)) from None

    @functools.cached_property
    def _field_adapters(self) -> dict[str, TypeAdapter[Any]]:
        return {
            f.name: TypeAdapter(Annotated[pydantic_annotation(f.annotation), f.info])
            for f in self.fields
        }

    def decode_root(self, value: Any) -> dict[str, Any]:
        """Validated arguments for a root input from its one value (or its JSON text)."""
        f = self.root_field
        assert self.root_adapter is not None
        try:
            if value is MISSING:
                if f.required:
                    raise InvalidArgument.at([f.name], "Field required", "missing")
                validated = f.default
            elif type(value) is JsonText:
                validated = self.root_adapter.validate_json(value.data)
            else:
                validated = self.root_adapter.validate_python(value)
        except ValidationError as exc:
            raise invalid_argument(exc, prefix=(f.name,)) from None
        return {f.name: validated}

    def _arguments(self, model: BaseModel) -> dict[str, Any]:
        # The validated values themselves (no model_dump: nested models stay models).
        return dict(model.__dict__)

    # ------------------------------------------------------------------ invocation
    def bind(self, instance: Any) -> Callable[..., Any]:
        return getattr(instance, self.method_name)


def invalid_argument(
    exc: ValidationError | FieldError, prefix: tuple[str | int, ...] = ()
) -> InvalidArgument:
    """The one translation of a validation failure into the error model."""
    if isinstance(exc, FieldError):
        loc = [*prefix, *exc.loc]
        # A media-type mismatch is the same error class on every protocol (415 over HTTP).
        cls = UnsupportedMediaType if exc.type == "content_type" else InvalidArgument
        return cls.at(loc, exc.msg, exc.type)
    detail = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = [*prefix, *err["loc"]]
        if loc[: len(prefix) + 1] == [*prefix, "__root__"]:
            loc = list(prefix)
        detail.append({"loc": loc, "msg": err["msg"], "type": err["type"]})
    first = detail[0] if detail else {"loc": [], "msg": str(exc)}
    where = ".".join(str(p) for p in first["loc"])
    summary = f"{where}: {first['msg']}" if where else first["msg"]
    if len(detail) > 1:
        summary += f" (and {len(detail) - 1} more)"
    return InvalidArgument(summary, detail=detail)
