"""Reading one API method's signature into an `APISpec`, enforcing every rule at once.

All failures are `TypeError`s (precisely `ContractError`) raised when the class is
decorated, naming the class, the method and the parameter, so a bad contract never
reaches a server.
"""

from __future__ import annotations

import collections.abc as cabc
import inspect
import keyword
import typing
import warnings
from dataclasses import dataclass
from typing import Any, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..codecs import codec_for, pydantic_annotation
from ..codecs.containers import OptionalCodec
from ..codecs.finite import NONFINITE_SCHEMA, allows_nonfinite
from ..codecs.models import ModelCodec
from ..codecs.registry import split_annotated
from ..context import Context
from ..naming import camel
from ..validators import FieldNumber
from .descriptor import APISpec, FieldSpec, OutputSpec

#: Routes the server owns; an API may not take them.
RESERVED_ROUTES = frozenset({
    "/schema.json", "/docs.json", "/docs", "/livez", "/readyz", "/healthz", "/metrics",
})

_STREAM_ORIGINS = (
    cabc.Generator, cabc.AsyncGenerator, cabc.Iterator, cabc.AsyncIterator,
    cabc.Iterable, cabc.AsyncIterable,
)
#: A parameter annotated with one of these takes a stream of its argument's type:
#: origin -> whether the method iterates it with `async for`.
_INPUT_STREAMS = {cabc.AsyncIterator: True, cabc.AsyncIterable: True,
                  cabc.Iterator: False, cabc.Iterable: False}

#: pydantic config of every generated input model: unknown fields are errors (a typo
#: must not silently fall back to a default), bytes travel as base64 in JSON, and NaN
#: and infinity are refused unless a parameter opts in (`allow_inf_nan=True`; see
#: tensorwire.codecs.finite, which covers models of the user's and `Any` too).
INPUT_CONFIG = ConfigDict(
    extra="forbid",
    val_json_bytes="base64",
    ser_json_bytes="base64",
    protected_namespaces=(),
    allow_inf_nan=False,
)


class ContractError(TypeError):
    """A definition-time rule was broken (the message names class, method, parameter).

    A TypeError, as the SDK promises; its own class lets the CLI tell a contract mistake
    (one line, exit 2) from any other exception the user's module raised while it was
    imported (shown with its traceback).
    """


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


def read_api(cls: type, func: Any, config: APIConfig) -> APISpec:
    where = f"{cls.__qualname__}.{func.__name__}"

    def fail(msg: str, param: str | None = None) -> typing.NoReturn:
        at = f"{where}(), parameter {param!r}" if param else f"{where}()"
        raise ContractError(f"{at}: {msg}")

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
            annotation, streamed = _stream_element(hints[p.name])
            info = _field_info(p, fail)
            kind = "positional" if p.kind is inspect.Parameter.POSITIONAL_ONLY else "keyword"
            fields.append(_field_spec(p.name, annotation, info, kind, fail))
            fields[-1].stream = streamed
        input_model = _input_model(camel(name) + "Input", fields, fail)
    is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    _check_streamed_input(fields, hints, is_async, config.batchable, fail)
    _check_defaults(camel(name) + "Defaults", fields, fail)

    root_adapter = None
    if input_shape == "root":
        f = fields[0]
        root_adapter = TypeAdapter(
            typing.Annotated[pydantic_annotation(f.annotation), f.info],
            config=_root_config(f),
        )

    output = _output_spec(hints.get("return", typing.Any), config.output_spec, fail)

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


def _stream_element(annotation: Any) -> tuple[Any, bool]:
    """(the element's annotation, True) for a streamed input (`AsyncIterator[T]`,
    `Iterator[T]`; constraints written on the iterator apply to each element), else
    (the annotation, False)."""
    base, metadata = split_annotated(annotation)
    if (get_origin(base) or base) not in _INPUT_STREAMS:
        return annotation, False
    args = get_args(base)
    element = args[0] if args else typing.Any
    return (typing.Annotated[(element, *metadata)] if metadata else element), True


def _check_streamed_input(fields: list[FieldSpec], hints: dict[str, Any], is_async: bool,
                          batchable: bool, fail: Any) -> None:
    """A streamed input is the API's only input (a Context may sit beside it), has no
    default, is iterated as the method runs (`async for` in an `async def`, `for` in a
    `def`) and is never batched: a call is one stream, not one value to merge."""
    streamed = next((f for f in fields if f.stream), None)
    if streamed is None:
        return
    other = next((f for f in fields if f is not streamed), None)
    if other is not None:
        fail(f"a streamed input ({streamed.name!r}) must be the API's only input (a "
             f"Context may sit beside it); found {other.name!r} too", other.name)
    if not streamed.required:
        fail("a streamed input takes no default (a call always sends a stream, perhaps "
             "an empty one)", streamed.name)
    origin = get_origin(split_annotated(hints[streamed.name])[0])
    if _INPUT_STREAMS[origin] != is_async:
        wanted = "AsyncIterator[T]" if is_async else "Iterator[T]"
        kind = "an async def" if is_async else "a def"
        fail(f"{kind} method iterates its stream with {'async for' if is_async else 'for'}:"
             f" annotate it {wanted}", streamed.name)
    if batchable:
        fail("a streamed input cannot be batchable (each call is one stream)",
             streamed.name)


def _check_batchable(fields: list[FieldSpec], output: OutputSpec, context_param: str | None,
                     fail: Any) -> None:
    if output.stream:
        fail("a streaming API cannot be batchable")
    if context_param is not None:
        fail("a batchable API serves many requests per call, so it cannot take a Context",
             context_param)
    if not any(f.codec.batch is not None for f in fields):
        fail("batchable=True needs at least one list, tensor or DataFrame input to batch")
    if output.codec.batch is None:
        fail("batchable=True needs a list, tensor or DataFrame return type (or a model "
             "whose fields all are) to split back")


def _root_config(f: FieldSpec) -> ConfigDict | None:
    # A model type carries its own config; TypeAdapter refuses a second one.
    if isinstance(f.codec, ModelCodec):
        return None
    return ConfigDict(val_json_bytes="base64", ser_json_bytes="base64", allow_inf_nan=False)


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
    definitions = {f.name: (_with_nonfinite_schema(f), f.info) for f in fields}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "field shadows a BaseModel attribute"
            return create_model(model_name, __config__=INPUT_CONFIG, **definitions)
    except Exception as exc:
        fail(f"cannot build the input model: {exc}")


def _check_defaults(model_name: str, fields: list[FieldSpec], fail: Any) -> None:
    """A default must pass its own annotation and constraints, checked now.

    pydantic does not validate defaults (`validate_default` is off, for speed), so
    `n: int = "five"` or `Annotated[int, Ge(1)] = 0` would otherwise be found only by
    the first request that leaves the input out. One throw-away model of the defaulted
    fields, validating its defaults, checks them all at once; a `default_factory` is
    exempt (calling it at class definition could be costly or have side effects).
    """
    defaulted = {f.name: (pydantic_annotation(f.annotation), f.info) for f in fields
                 if not f.info.is_required() and f.info.default_factory is None}
    if not defaulted:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "field shadows a BaseModel attribute"
            model = create_model(model_name, __config__=_DEFAULTS_CONFIG, **defaulted)
        model()
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        name = str(error["loc"][0]) if error["loc"] else next(iter(defaulted))
        where = ".".join(str(p) for p in error["loc"][1:])
        default = defaulted[name][1].default
        fail(f"the default {default!r} fails its own annotation"
             f"{' at ' + where if where else ''}: {error['msg']}", name)


#: The input models' config, validating defaults (only for `_check_defaults`).
_DEFAULTS_CONFIG = ConfigDict(**INPUT_CONFIG, validate_default=True)


def _with_nonfinite_schema(f: FieldSpec) -> Any:
    """The field's pydantic annotation; a float opted in by `Field(allow_inf_nan=True)`
    documents the strings it may come as, as `Annotated[float, AllowInfNan()]` does."""
    annotation = pydantic_annotation(f.annotation)
    base, _ = split_annotated(f.annotation)
    if isinstance(base, type) and issubclass(base, float) and allows_nonfinite((f.info,)):
        return typing.Annotated[annotation, NONFINITE_SCHEMA]
    return annotation


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
