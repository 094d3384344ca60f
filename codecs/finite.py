"""Non-finite numbers (NaN, ±infinity): refused unless the contract opts in; never `null`.

JSON has no NaN or infinity, yet pydantic's JSON parser reads the bare tokens `NaN`,
`Infinity`, `-Infinity` (and `1e999` overflows to infinity), its floats accept them, and
its JSON writer turns them into `null`: a client could send NaN and get `null` back, and
a method's NaN reached clients as `null` without a word. One rule instead, on both wires:

- **Inputs**: a non-finite number anywhere in a request (a float parameter, a list or
  map of them, a field of a model, a number inside `Any`/`dict`) is 400 /
  INVALID_ARGUMENT (`finite_number`), whether it came as a JSON token, an overflowing
  literal, the string "NaN" or a gRPC double.
- **Opting in** is pydantic's own `allow_inf_nan`: `Annotated[float, AllowInfNan()]`,
  `Field(allow_inf_nan=True)`, or a model's `model_config = ConfigDict(allow_inf_nan=
  True)` for the floats of its own fields. An opted-in float reads NaN and ±infinity as
  JSON tokens or as the strings "NaN", "Infinity", "-Infinity", and is written
  faithfully: a double over gRPC; in JSON those strings (the form tensors use,
  `codecs.jsonarray`), which a model of yours writes only with its config's
  `ser_json_inf_nan="strings"` (pydantic's default writes `null`, refused here).
- **Outputs**: a non-finite float the contract does not allow is a server error (500 /
  INTERNAL, logged with where it was), on both wires, never `null`.
- JSON values (`Any`, `dict`) have no opt-in: JSON cannot carry the numbers.
- Tensors and data frames are their codecs' own: a tensor carries non-finite values
  faithfully on both wires.

How. Floats in the API's own schemas (parameters, lists and maps of floats) are checked
by pydantic itself: the generated input model sets `allow_inf_nan=False`. Models of the
user's keep their own config and their own compiled validators and serializers (pydantic
reuses those inside any other schema), and `Any` is never checked; values of codecs
with `unchecked_floats` are therefore walked (`find_nonfinite`, only the fields that can
hold a float) after validation. JSON output is written with
`ser_json_inf_nan="constants"`, so a stray float shows as a bare token that
`checked_json` refuses; `Codec.dump_json` parses or walks only when a substring search
finds "NaN", "Infinity" or (where a model of the user's may have written one) `null`.
Over gRPC a double is checked as it is written (`finite`).
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import math
import types
import typing
from typing import Annotated, Any, get_args, get_origin

import orjson
from pydantic import AllowInfNan, BaseModel, TypeAdapter, WithJsonSchema
from pydantic_core import CoreSchema, SchemaSerializer, core_schema

from ..errors import InternalError
from ..wire.field_error import FieldError

#: The message of a refused input (pydantic's own for `allow_inf_nan=False`).
MESSAGE = "Input should be a finite number"
_ATOMS = frozenset({str, int, bool, bytes, type(None)})


def allows_nonfinite(metadata: tuple[Any, ...]) -> bool:
    """Whether annotation metadata opts a float in (`AllowInfNan()`,
    `Field(allow_inf_nan=True)`)."""
    for m in metadata:
        if isinstance(m, AllowInfNan):
            return bool(m.allow_inf_nan)
        if getattr(m, "allow_inf_nan", None) is True:
            return True
        nested = getattr(m, "metadata", None)  # a FieldInfo holds its own
        if isinstance(nested, list) and allows_nonfinite(tuple(nested)):
            return True
    return False


def loosen(annotation: Any) -> Any:
    """`annotation` with its floats opted in, inside lists, maps and `X | None` too: what
    a model's `allow_inf_nan=True` config means for its fields."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Annotated:
        return Annotated[(loosen(args[0]), *args[1:])]
    if isinstance(annotation, type) and issubclass(annotation, float):
        return Annotated[annotation, AllowInfNan()]
    if origin in (list, set, frozenset, tuple, dict, typing.Union, types.UnionType):
        new = tuple(a if a is Ellipsis else loosen(a) for a in args)
        if all(n is a for n, a in zip(new, args, strict=True)):
            return annotation
        if origin in (typing.Union, types.UnionType):
            return typing.Union[new]  # noqa: UP007 - rebuilt from a tuple
        return origin[new if len(new) > 1 else new[0]]
    return annotation


# ------------------------------------------------------------------ walking values
_CONTAINERS = (list, tuple, set, frozenset, dict, cabc.Sequence, cabc.MutableSequence,
               cabc.Set, cabc.Collection, cabc.Iterable, cabc.Mapping, cabc.MutableMapping)


def _may_hold_floats(annotation: Any) -> bool:
    """Whether a value of `annotation` can hold a float the walk should look at: floats,
    `Any`, containers and unions of them, and models (which answer for themselves).
    Scalars of other types, and family types (tensors carry NaN faithfully), cannot."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if annotation is Any or annotation is object:
        return True
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is typing.Literal:
        return any(isinstance(a, float) for a in args)
    if origin in (typing.Union, types.UnionType) or origin in _CONTAINERS:
        return not args or any(a is not Ellipsis and _may_hold_floats(a) for a in args)
    if annotation in _CONTAINERS:
        return True  # a bare `dict` / `list`: anything inside
    if isinstance(annotation, type):  # not other scalars, tensors, frames, images, files
        return issubclass(annotation, float | BaseModel)
    return True  # a type form we do not know: look


@functools.cache
def _model_plan(model: type[BaseModel]) -> tuple[bool, tuple[tuple[str, str, bool], ...]]:
    """(model writes "NaN" strings, ((attribute, loc key, opted in), ...)) for the fields
    of a model class that may hold floats."""
    config = model.model_config
    loose = config.get("allow_inf_nan") is True
    strings = config.get("ser_json_inf_nan") == "strings"
    fields = tuple(
        (name, info.alias if isinstance(info.alias, str) else name,
         loose or allows_nonfinite(tuple(info.metadata)))
        for name, info in model.model_fields.items()
        if _may_hold_floats(info.annotation))
    return strings, fields


def find_nonfinite(value: Any, writing_json: bool = False, loose: bool = False
                   ) -> list[str | int] | None:
    """The path to the first NaN or infinity in `value` that is not allowed, else None.

    A float is allowed where a model field opts it in (down to the next model); when
    `writing_json`, only if that model also writes it as a string, since its own
    serializer would write `null` otherwise.
    """
    kind = type(value)
    if kind is float:
        return None if loose or value - value == 0.0 else []
    if kind in _ATOMS:
        return None
    if isinstance(value, BaseModel):
        strings, fields = _model_plan(kind)
        attrs = value.__dict__
        opt_ok = strings or not writing_json
        for name, key, opted in fields:
            hit = find_nonfinite(attrs.get(name), writing_json, opted and opt_ok)
            if hit is not None:
                return [key, *hit]
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if type(v) in _ATOMS:
                continue
            hit = find_nonfinite(v, writing_json, loose)
            if hit is not None:
                return [k, *hit]
        return None
    if isinstance(value, list | tuple | set | frozenset):
        for i, v in enumerate(value):
            if type(v) in _ATOMS:
                continue
            hit = find_nonfinite(v, writing_json, loose)
            if hit is not None:
                return [i, *hit]
    return None


def refuse_nonfinite_output(value: Any, *, writing_json: bool) -> None:
    """InternalError when an output holds a NaN or infinity the contract does not allow."""
    hit = find_nonfinite(value, writing_json)
    if hit is not None:
        where = ".".join(str(p) for p in hit) or "the value"
        raise InternalError(
            f"the output holds NaN or infinity at {where}, where the contract allows only "
            "finite numbers; opt in with allow_inf_nan=True (and, in a model of yours, "
            "ser_json_inf_nan='strings' so that JSON can carry it)")


# ------------------------------------------------------------------ writing JSON
def _as_json_string(value: float) -> Any:
    """An opted-in float in JSON: itself, or "NaN" / "Infinity" / "-Infinity"."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


_AS_STRING = core_schema.plain_serializer_function_ser_schema(
    _as_json_string, when_used="json-unless-none")


def _opted_floats_as_strings(node: Any) -> Any:
    """A copy of a core schema whose opted-in floats are written as strings in JSON."""
    if isinstance(node, list):
        return [_opted_floats_as_strings(item) for item in node]
    if not isinstance(node, dict):
        return node
    copied = {k: (v if k == "metadata" else _opted_floats_as_strings(v))
              for k, v in node.items()}
    if copied.get("type") == "float" and copied.get("allow_inf_nan") is True and (
            "serialization" not in copied):
        copied["serialization"] = _AS_STRING
    return copied


def output_serializer(adapter: TypeAdapter[Any]) -> SchemaSerializer:
    """How a codec writes its outputs: as `adapter` would, except that a non-finite
    float is a bare token (for `checked_json` to refuse), or a string where opted in."""
    schema: CoreSchema = _opted_floats_as_strings(adapter.core_schema)
    return SchemaSerializer(schema, {"ser_json_inf_nan": "constants"})


def checked_json(data: bytes) -> bytes:
    """`data` (JSON from an `output_serializer`) unless it holds a bare NaN or Infinity
    token, which no JSON parser reads: InternalError then."""
    try:
        orjson.loads(data)  # strict JSON: fails exactly on the bare tokens
    except orjson.JSONDecodeError:
        raise InternalError(
            "the output holds NaN or infinity where the contract allows only finite "
            "numbers (JSON cannot carry them); opt in with allow_inf_nan=True to send "
            'them as "NaN" / "Infinity"') from None
    return data  # the words were inside strings


#: The JSON Schema of an opted-in float: a number or one of the strings it is written as
#: (the form tensor elements document, `codecs.tensor`).
NONFINITE_SCHEMA = WithJsonSchema(
    {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]})


# ------------------------------------------------------------------ protobuf doubles
def finite(value: float, allowed: bool) -> float:
    """A float for a protobuf double: FieldError when non-finite and not `allowed`."""
    if allowed or value - value == 0.0:
        return value
    raise FieldError(f"{value!r} is not allowed: the contract allows only finite numbers "
                     "here (opt in with allow_inf_nan=True)", type="finite_number")
