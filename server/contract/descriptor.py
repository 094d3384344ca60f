"""The descriptor registry: what a service and each of its APIs are, read once.

Pure data: `ServiceSpec` holds the APIs, `APISpec` one API's fields, output and options,
as read from the method's signature when the class is decorated (`signature`).
Everything else (validation, JSON Schema, OpenAPI, protobuf messages, routes) is derived
from these; nothing about an API is written down twice. Decoding a request is in
`decoding`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter
from pydantic.fields import FieldInfo

from ..codecs import MISSING, Codec
from ..naming import camel

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
    #: The parameter takes a stream (`AsyncIterator[T]` / `Iterator[T]`): `annotation`
    #: and `codec` are one element's, each validated as a unary input of that type.
    stream: bool = False

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
    #: Its service declares dependencies (`tensorwire.depends`): the method may call
    #: other services, so its requests carry what crosses such a call (the request's
    #: headers, deadline and cancellation: `tensorwire.runtime.call_frame`).
    composed: bool = False

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
        return any(f.codec.http.is_file for f in self.fields)

    @functools.cached_property
    def stream_input(self) -> FieldSpec | None:
        """The input that takes a stream of elements (the API's only one), if any:
        client-streaming (or, with a generator output, bidirectional) on gRPC, a
        WebSocket on HTTP."""
        return next((f for f in self.fields if f.stream), None)

    @functools.cached_property
    def field_by_name(self) -> dict[str, FieldSpec]:
        return {f.name: f for f in self.fields}

    # ------------------------------------------------------------------ invocation
    def bind(self, instance: Any) -> Callable[..., Any]:
        return getattr(instance, self.method_name)


@dataclass(eq=False)
class ServiceSpec:
    """A service: its name, its class and its APIs in declaration order."""

    name: str
    cls: type
    apis: dict[str, APISpec]
    doc: str | None = None
    #: protobuf package of the generated .proto (default: the snake_case service name).
    proto_package: str = ""
    #: .proto file options given to `@service(...)` (go_package, java_package,
    #: csharp_namespace); those not given are derived from proto_package.
    file_options: dict[str, str] = field(default_factory=dict)
    #: Free-form settings given to `@service(...)` (e.g. workers, traffic), kept for tools.
    config: dict[str, Any] = field(default_factory=dict)
    #: Its `tensorwire.depends(...)` attributes by name (`contract.dependency`).
    dependencies: dict[str, Any] = field(default_factory=dict)

    @property
    def grpc_service_name(self) -> str:
        """Fully-qualified gRPC service name, e.g. `iris.Iris`."""
        return f"{self.proto_package}.{camel(self.name)}"
