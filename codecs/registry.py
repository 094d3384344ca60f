"""Which codec owns an annotation: one lookup, done at class-definition time.

Framework families (tensors, data frames, images, files) are matched by the class's
module and name, so the lookup never imports torch, tensorflow, pandas or PIL; the codec
module of a family is imported the first time a service uses one of its types.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import enum
import importlib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, TypeAdapter
from pydantic.errors import PydanticSchemaGenerationError

from ..validators import ContentType, FieldNumber
from .containers import ListCodec, MapCodec, OptionalCodec
from .core import Codec
from .finite import NONFINITE_SCHEMA, allows_nonfinite
from .jsonvalues import JsonListCodec, JsonValueCodec, StructCodec
from .markers import FAMILY_MARKERS, CodecMarker
from .models import ModelCodec
from .scalars import (
    BytesCodec,
    FloatCodec,
    ScalarCodec,
    StrCodec,
    StringFormCodec,
    enum_codec,
    literal_codec,
)
from .temporal import DatetimeCodec, TimedeltaCodec
from .unions import UnionCodec


@dataclass(frozen=True)
class Family:
    """A lazily imported family of framework types."""

    name: str
    matches: Callable[[Any], bool]
    #: "module:function", called as function(base_type, metadata, annotation) -> Codec
    build: str

    def load(self) -> Callable[[Any, tuple[Any, ...], Any], Codec]:
        module, _, func = self.build.partition(":")
        return getattr(importlib.import_module(module), func)


def class_named(module_prefix: str, *names: str) -> Callable[[Any], bool]:
    """A matcher true for classes called `names` defined under `module_prefix`."""

    def matches(tp: Any) -> bool:
        if not isinstance(tp, type):
            return False
        for cls in tp.__mro__:
            mod = getattr(cls, "__module__", "") or ""
            in_module = mod == module_prefix or mod.startswith(module_prefix + ".")
            if cls.__name__ in names and in_module:
                return True
        return False

    return matches


_FAMILIES: list[Family] = []


def register_family(family: Family) -> None:
    """Add a family; later registrations win over earlier ones for the same type."""
    _FAMILIES.insert(0, family)


_CACHE: dict[Any, Codec] = {}


def split_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """`Annotated[T, a, b]` -> (T, (a, b)); nested Annotated flattens."""
    metadata: tuple[Any, ...] = ()
    while get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        metadata = (*metadata, *extra)
        annotation = base
    return annotation, metadata


def codec_for(annotation: Any) -> Codec:
    """The codec for one parameter/field/output annotation; TypeError if none fits."""
    try:
        return _CACHE[annotation]
    except (KeyError, TypeError):
        pass
    codec = _build(annotation)
    try:
        _CACHE[annotation] = codec
    except TypeError:  # unhashable metadata (e.g. a FieldInfo): not cached
        pass
    return codec


def _with_metadata(tp: Any, metadata: tuple[Any, ...]) -> Any:
    return Annotated[(tp, *metadata)] if metadata else tp


def _type_name(tp: Any) -> str:
    return getattr(tp, "__qualname__", None) or repr(tp)


def _reject_family_markers(base: Any, metadata: tuple[Any, ...]) -> None:
    for m in metadata:
        if isinstance(m, FAMILY_MARKERS):
            raise TypeError(f"{type(m).__name__} does not apply to {_type_name(base)}")


def _plain(metadata: tuple[Any, ...]) -> tuple[Any, ...]:
    """Metadata pydantic should see: minus FieldNumber and the family markers."""
    return tuple(m for m in metadata if not isinstance(m, (FieldNumber, *FAMILY_MARKERS)))


def _build(annotation: Any) -> Codec:
    base, metadata = split_annotated(annotation)
    for m in metadata:
        if isinstance(m, CodecMarker):
            return m.codec
    origin = get_origin(base)

    if origin is Union or origin is types.UnionType:
        return _union(base, metadata, annotation)

    for family in _FAMILIES:
        target = origin if origin is not None else base
        if family.matches(target):
            return family.load()(base, metadata, annotation)

    return _standard(base, origin, metadata, annotation)


def _union(base: Any, metadata: tuple[Any, ...], annotation: Any) -> Codec:
    args = get_args(base)
    rest = [a for a in args if a is not type(None)]
    if len(rest) == 1 and len(rest) < len(args):
        inner = codec_for(_with_metadata(rest[0], metadata))
        return OptionalCodec(base, inner.annotation | None, inner)
    discriminator = _discriminator(metadata)
    if discriminator is not None and all(
        isinstance(a, type) and issubclass(a, BaseModel) for a in rest
    ):
        union = UnionCodec(Union[tuple(rest)], rest, discriminator, codec_for)  # noqa: UP007
        if len(rest) < len(args):
            return OptionalCodec(base, union.annotation | None, union)
        return union
    raise TypeError(
        f"Union type {base} is not supported: use `X | None` (Optional), a single type, or "
        "a discriminated union of models (`Field(discriminator=...)`)"
    )


def _discriminator(metadata: tuple[Any, ...]) -> str | None:
    """The discriminator field name given by `Field(discriminator="kind")`."""
    for m in metadata:
        value = getattr(m, "discriminator", None)
        if isinstance(value, str):
            return value
    return None


_SEQUENCES = (list, tuple, set, frozenset, cabc.Sequence, cabc.Set, cabc.MutableSequence,
              cabc.Collection, cabc.Iterable)
_MAPPINGS = (dict, cabc.Mapping, cabc.MutableMapping)


def _standard(base: Any, origin: Any, metadata: tuple[Any, ...], annotation: Any) -> Codec:
    if isinstance(base, type) and issubclass(base, bytes):
        return _bytes(base, metadata)
    _reject_family_markers(base, metadata)
    if base is typing.Any or base is object:
        return JsonValueCodec(base)
    if origin is Literal:
        return literal_codec(get_args(base), base)
    if origin in _SEQUENCES or base in _SEQUENCES:
        return _sequence(base, origin)
    if origin in _MAPPINGS or base in _MAPPINGS:
        return _mapping(base)
    if not isinstance(base, type):
        raise TypeError(f"unsupported annotation {base!r}")
    if issubclass(base, enum.Enum):
        return enum_codec(base, base)
    if issubclass(base, bool):
        return ScalarCodec(base, base, bool)
    if issubclass(base, str):
        return StrCodec(base, base, str)
    if issubclass(base, int):
        return ScalarCodec(base, base, int)
    if issubclass(base, float):
        return FloatCodec(base, allows_nonfinite(metadata))
    if issubclass(base, dt.datetime):
        return DatetimeCodec(base)
    if issubclass(base, dt.timedelta):
        return TimedeltaCodec(base)
    if issubclass(base, BaseModel):
        return _model(base)
    return _fallback(base)


def _bytes(base: type, metadata: tuple[Any, ...]) -> Codec:
    """`bytes`, optionally `Annotated[bytes, ContentType(...)]`: a raw body of that type."""
    content_types = [m for m in metadata if isinstance(m, ContentType)]
    _reject_family_markers(base, tuple(m for m in metadata if not isinstance(m, ContentType)))
    if len(content_types) > 1:
        raise TypeError("bytes takes one ContentType (list patterns with commas)")
    annotation = _with_metadata(base, _plain(metadata))
    return BytesCodec(base, annotation, bytes,
                      content_type=content_types[0] if content_types else None)


def _model(model: type) -> Codec:
    """One codec per model class, cached before its fields resolve (recursive models)."""
    codec = _CACHE.get(model)
    if codec is None:
        codec = _CACHE[model] = ModelCodec(model, codec_for)
    return codec


def _sequence(base: Any, origin: Any) -> Codec:
    args = get_args(base)
    container = origin or base
    if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return JsonValueCodec(base)  # a heterogeneous tuple: a JSON array
    item = codec_for(args[0] if args else Any)
    if item.is_container:
        if item.has_tensors or item.http.is_file:
            raise TypeError(f"{_type_name(base)}: nested containers of tensors or files "
                            "are not supported; use a tensor of higher rank")
        return JsonListCodec(base)
    return ListCodec(base, list[item.annotation], item)


def _mapping(base: Any) -> Codec:
    args = get_args(base)
    key_type, value_type = args if len(args) == 2 else (str, Any)
    if value_type is typing.Any and key_type is str:
        return StructCodec(base)
    if key_type not in (str, int, bool):
        return JsonValueCodec(base)
    value = codec_for(value_type)
    if value.is_container:
        if value.has_tensors or value.http.is_file:
            raise TypeError(f"{_type_name(base)}: maps of containers of tensors or files "
                            "are not supported")
        return JsonValueCodec(base)
    return MapCodec(base, dict[key_type, value.annotation], codec_for(key_type), value)


def _fallback(base: type) -> Codec:
    """A type pydantic validates but we have no codec for: its JSON form on every wire."""
    try:
        schema = TypeAdapter(base).json_schema()
    except (PydanticSchemaGenerationError, TypeError) as exc:
        raise TypeError(
            f"unsupported type {_type_name(base)}: tensorwire has no codec for it and "
            f"pydantic cannot validate it ({type(exc).__name__})"
        ) from None
    except Exception:
        schema = {}
    if schema.get("type") == "string":
        return StringFormCodec(base)
    return JsonValueCodec(base)


def pydantic_annotation(annotation: Any) -> Any:
    """The annotation the API's pydantic model declares for a value.

    The user's annotation with its constraints intact, where only framework types are
    replaced by their codec's annotation (which carries Shape/DType/... as a pydantic
    schema) and protobuf-only markers are dropped.
    """
    base, metadata = split_annotated(annotation)
    if any(isinstance(m, CodecMarker) for m in metadata):
        return annotation
    if isinstance(base, type) and issubclass(base, float) and allows_nonfinite(metadata):
        metadata = (*metadata, NONFINITE_SCHEMA)  # the contract shows "NaN", "Infinity"
    origin = get_origin(base)
    target = origin if origin is not None else base
    if any(f.matches(target) for f in _FAMILIES):
        return codec_for(annotation).annotation
    args = get_args(base)
    family_markers = tuple(m for m in metadata if isinstance(m, FAMILY_MARKERS))
    if family_markers and (origin is Union or origin is types.UnionType):
        # `Annotated[X | None, Shape(...)]`: the markers constrain X.
        rest = [a for a in args if a is not type(None)]
        inner = pydantic_annotation(Annotated[(rest[0], *family_markers)])
        return _with_metadata(inner | None, _plain(metadata))
    if args and origin is not Literal and origin is not Annotated:
        new_args = tuple(a if a is Ellipsis else pydantic_annotation(a) for a in args)
        if any(n is not o for n, o in zip(new_args, args, strict=True)):
            if origin is Union or origin is types.UnionType:
                base = Union[new_args]  # noqa: UP007 - rebuilt from a tuple
            else:
                base = origin[new_args if len(new_args) > 1 else new_args[0]]
    return _with_metadata(base, _plain(metadata))


# The built-in families, matched without importing their framework: each codec module
# is imported the first time a service uses one of its types.
def _register_builtin_families() -> None:
    register_family(Family(
        "path", lambda tp: isinstance(tp, type) and issubclass(tp, PurePath),
        "tensorwire.codecs.files:build"))
    register_family(Family("image", class_named("PIL.Image", "Image"),
                           "tensorwire.codecs.image:build"))
    # tf.Tensor is tensorflow.python.framework.tensor.Tensor; eager tensors
    # (tensorflow.python.framework.ops.EagerTensor) have it in their MRO.
    register_family(Family("numpy", class_named("numpy", "ndarray"),
                           "tensorwire.codecs.tensor:build_numpy"))
    register_family(Family("torch", class_named("torch", "Tensor"),
                           "tensorwire.codecs.tensor:build_torch"))
    register_family(Family("tensorflow", class_named("tensorflow", "Tensor"),
                           "tensorwire.codecs.tensor:build_tensorflow"))
    register_family(Family("pandas", class_named("pandas", "DataFrame"),
                           "tensorwire.codecs.dataframe:build"))


_register_builtin_families()
