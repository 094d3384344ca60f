"""Reading one API method's signature into an `APISpec`, enforcing every rule at once.

All failures are `TypeError`s raised when the class is decorated, naming the class, the
method and the parameter, so a bad contract never reaches a server.
"""

from __future__ import annotations

import collections.abc as cabc
import inspect
import keyword
import re
import typing
import warnings
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from .codecs import codec_for, pydantic_annotation
from .codecs.registry import split_annotated
from .codecs.standard import ModelCodec, OptionalCodec
from .codecs.validators import FieldNumber
from .context import Context
from .spec import APISpec, FieldSpec, OutputSpec

#: Routes the server owns; an API may not take them.
RESERVED_ROUTES = frozenset({
    "/schema.json", "/docs.json", "/docs", "/livez", "/readyz", "/healthz", "/metrics",
})

_STREAM_ORIGINS = (
    cabc.Generator, cabc.AsyncGenerator, cabc.Iterator, cabc.AsyncIterator,
    cabc.Iterable, cabc.AsyncIterable,
)

#: pydantic config of every generated input model: unknown fields are errors (a typo
#: must not silently fall back to a default) and bytes travel as base64 in JSON.
INPUT_CONFIG = ConfigDict(
    extra="forbid",
    val_json_bytes="base64",
    ser_json_bytes="base64",
    protected_namespaces=(),
)


@dataclass(frozen=True)
class APIConfig:
    """What `@tensorwire.api(...)` was given."""

    route: str | None = None
    name: str | None = None
    input_spec: type[BaseModel] | None = None
    output_spec: type[BaseModel] | None = None
    batchable: bool = False
    batch_dim: int | tuple[int, int] = 0
    max_batch_size: int = 64
    max_latency_ms: float = 10.0


def camel(name: str) -> str:
    """snake_case or kebab-case -> CamelCase (protobuf message and rpc names)."""
    parts = re.split(r"[^0-9A-Za-z]+", name)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def read_api(cls: type, func: Any, config: APIConfig) -> APISpec:
    where = f"{cls.__qualname__}.{func.__name__}"

    def fail(msg: str, param: str | None = None) -> typing.NoReturn:
        at = f"{where}(), parameter {param!r}" if param else f"{where}()"
        raise TypeError(f"{at}: {msg}")

    name = config.name or func.__name__
    if not name.isidentifier() or keyword.iskeyword(name):
        fail(f"API name {name!r} must be a Python identifier")
    route = config.route or f"/{name}"
    if not route.startswith("/"):
        route = "/" + route
    if route in RESERVED_ROUTES:
        fail(f"route {route!r} is reserved by the server")

    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        fail(f"cannot resolve annotations: {exc}")
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    if not params or (params[0].name != "self" and params[0].kind not in (
        inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
    )):
        fail("an API must be a method taking `self` first")
    params = params[1:]

    context_param: str | None = None
    context_positional = False
    positional: list[inspect.Parameter] = []
    keywords: list[inspect.Parameter] = []
    var_keyword: inspect.Parameter | None = None
    for p in params:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            fail("*args is not supported; declare each input", p.name)
        annotation = hints.get(p.name, inspect.Parameter.empty)
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            var_keyword = p
            continue
        if annotation is inspect.Parameter.empty:
            fail("every parameter needs a type annotation (it is the API contract)", p.name)
        base, _ = split_annotated(annotation)
        if isinstance(base, type) and issubclass(base, Context):
            if context_param is not None:
                fail("only one Context parameter is allowed", p.name)
            context_param = p.name
            context_positional = p.kind is inspect.Parameter.POSITIONAL_ONLY
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(p)
        else:
            keywords.append(p)

    if var_keyword is not None and config.input_spec is None:
        fail("**kwargs needs `input_spec=Model` to say what it accepts", var_keyword.name)
    if config.input_spec is not None and var_keyword is None:
        fail("input_spec=... needs a **kwargs parameter to receive the fields")
    if config.input_spec is not None and (positional or keywords):
        fail("with input_spec=..., declare no other inputs besides **kwargs and a Context")
    if len(positional) > 1:
        fail(
            "at most one positional-only parameter (the root input) is allowed; "
            f"found {', '.join(p.name for p in positional)}",
            positional[1].name,
        )
    if positional and keywords:
        fail(
            "a positional-only (root) input may stand beside nothing but a Context; "
            f"found {keywords[0].name!r} too",
            keywords[0].name,
        )

    fields: list[FieldSpec] = []
    if config.input_spec is not None:
        if not (isinstance(config.input_spec, type) and issubclass(config.input_spec, BaseModel)):
            fail("input_spec must be a pydantic model (tensorwire.IODescriptor)")
        input_shape = "input_spec"
        for fname, info in config.input_spec.model_fields.items():
            annotation = info.rebuild_annotation()
            fields.append(_field_spec(fname, annotation, info, "spec", fail))
        input_model = config.input_spec
    else:
        input_shape = "root" if positional else "keywords"
        for p in positional or keywords:
            annotation = hints[p.name]
            info = _field_info(p, fail)
            kind = "positional" if p.kind is inspect.Parameter.POSITIONAL_ONLY else "keyword"
            fields.append(_field_spec(p.name, annotation, info, kind, fail))
        input_model = _input_model(camel(name) + "Input", fields, fail)

    root_adapter = None
    if input_shape == "root":
        f = fields[0]
        root_adapter = TypeAdapter(
            typing.Annotated[pydantic_annotation(f.annotation), f.info],
            config=_root_config(f),
        )

    output = _output_spec(hints.get("return", typing.Any), config.output_spec, fail)

    is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    is_generator = inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func)
    if output.stream and not is_generator:
        fail("a Generator/AsyncGenerator return annotation needs a generator method (yield)")
    batch_dim = config.batch_dim if isinstance(config.batch_dim, tuple) else (
        config.batch_dim, config.batch_dim)
    if config.batchable:
        _check_batchable(fields, output, context_param, fail)

    return APISpec(
        name=name,
        route=route,
        method_name=func.__name__,
        doc=inspect.getdoc(func),
        fields=fields,
        input_shape=input_shape,
        input_model=input_model,
        output=output,
        is_async=is_async,
        context_param=context_param,
        context_positional=context_positional,
        batchable=config.batchable,
        batch_dim=batch_dim,
        max_batch_size=config.max_batch_size,
        max_latency_ms=config.max_latency_ms,
        root_adapter=root_adapter,
    )


def _check_batchable(fields: list[FieldSpec], output: OutputSpec, context_param: str | None,
                     fail: Any) -> None:
    if output.stream:
        fail("a streaming API cannot be batchable")
    if context_param is not None:
        fail("a batchable API serves many requests per call, so it cannot take a Context",
             context_param)
    if not any(f.codec.supports_batching for f in fields):
        fail("batchable=True needs at least one list, tensor or DataFrame input to batch")
    if not output.codec.supports_batching:
        fail("batchable=True needs a list, tensor or DataFrame return type (or a model "
             "whose fields all are) to split back")


def _root_config(f: FieldSpec) -> ConfigDict | None:
    # A model type carries its own config; TypeAdapter refuses a second one.
    if isinstance(f.codec, ModelCodec):
        return None
    return ConfigDict(val_json_bytes="base64", ser_json_bytes="base64")


def _field_info(p: inspect.Parameter, fail: Any) -> FieldInfo:
    default = p.default
    if isinstance(default, FieldInfo):
        return default
    if default is inspect.Parameter.empty:
        return Field()
    return Field(default=default)


def _refuse_unenforced(annotation: Any, metadata: Any = (), seen: set[int] | None = None
                       ) -> None:
    """TypeError for a constraint pydantic would silently ignore, wherever it sits.

    pydantic 2 accepts `annotated_types.Timezone` and enforces nothing (a naive datetime
    passes `Timezone(...)`), so a contract using it would promise a check that never runs.
    Model fields are walked too: they are part of the contract though their codecs
    resolve later.
    """
    seen = set() if seen is None else seen
    base, inner = split_annotated(annotation)
    for m in (*metadata, *inner):
        if isinstance(m, annotated_types.Timezone):
            raise TypeError(
                f"annotated_types.{m!r} is not supported: pydantic does not enforce it; "
                "use pydantic.AwareDatetime or pydantic.NaiveDatetime")
    if get_origin(base) is typing.Literal:
        return
    for arg in get_args(base):
        _refuse_unenforced(arg, (), seen)
    if isinstance(base, type) and issubclass(base, BaseModel) and id(base) not in seen:
        seen.add(id(base))
        for fname, info in base.model_fields.items():
            try:
                _refuse_unenforced(info.annotation, info.metadata, seen)
            except TypeError as exc:
                raise TypeError(f"{base.__qualname__}.{fname}: {exc}") from None


def _field_spec(name: str, annotation: Any, info: FieldInfo, kind: str, fail: Any) -> FieldSpec:
    if name.startswith("_"):
        fail("input names may not start with an underscore", name)
    try:
        _refuse_unenforced(annotation, info.metadata)
    except TypeError as exc:
        fail(str(exc), name)
    if getattr(info, "discriminator", None) is not None:
        annotation = typing.Annotated[annotation, Field(discriminator=info.discriminator)]
    try:
        codec = codec_for(annotation)
    except TypeError as exc:
        fail(str(exc), name)
    if isinstance(codec, OptionalCodec) and info.is_required():
        fail("an Optional input needs a default (e.g. `= None`)", name)
    _, metadata = split_annotated(annotation)
    number = next((m.number for m in metadata if isinstance(m, FieldNumber)), None)
    if number is None:
        number = next((m.number for m in info.metadata if isinstance(m, FieldNumber)), None)
    return FieldSpec(name=name, annotation=annotation, codec=codec, info=info, number=number,
                     kind=kind)


def _input_model(model_name: str, fields: list[FieldSpec], fail: Any) -> type[BaseModel]:
    definitions = {f.name: (pydantic_annotation(f.annotation), f.info) for f in fields}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "field shadows a BaseModel attribute"
            return create_model(model_name, __config__=INPUT_CONFIG, **definitions)
    except Exception as exc:
        fail(f"cannot build the input model: {exc}")


def _output_spec(annotation: Any, output_spec: type[BaseModel] | None, fail: Any) -> OutputSpec:
    stream = False
    base, _ = split_annotated(annotation)
    origin = get_origin(base) or base
    if origin in _STREAM_ORIGINS:
        stream = True
        args = get_args(base)
        annotation = args[0] if args else typing.Any
    if output_spec is not None:
        annotation = output_spec
    if annotation is None or annotation is type(None):
        annotation = type(None)
    try:
        _refuse_unenforced(annotation)
        codec = codec_for(typing.Any if annotation is type(None) else annotation)
    except TypeError as exc:
        fail(f"return type: {exc}")
    model = codec.python_type if isinstance(codec, ModelCodec) else None
    return OutputSpec(annotation=pydantic_annotation(annotation), codec=codec, stream=stream,
                      model=model)
