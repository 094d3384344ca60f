"""HTTP side: what each input/output is, read from the server's `/schema.json`.

`schema_kind(schema)` turns one JSON Schema node into a *kind* that knows how a value
travels over HTTP: as JSON (and how to rebuild datetimes, tensors... from it), as a raw
body or multipart file part, and how to decode a binary response. Plain JSON data
(strings, numbers, containers of them) is the trivial kind and is never walked, so a
list of a million floats costs nothing beyond orjson.

Framework types (tensors, frames, files) have kinds of their own, told apart by the
schema node their codec emits; `kinds` lists them and builds every kind.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ..wire.field_error import FieldError
from . import values
from .filedata import Body
from .response import Payload, charset_of


class JsonKind:
    """A value that is its own JSON form: sent and received as is."""

    #: Nothing to convert: JSON data is the value (containers of these are not walked).
    trivial: bool = True
    #: Sent as a multipart file part (or a raw body when it is the root input).
    is_file: bool = False
    #: A list of files: one part per item, all with the field's name.
    repeated_files: bool = False
    #: A plain string: a root input is a text/plain body, an output a text/plain body.
    is_text: bool = False
    #: Accept header asking for this kind's binary response form, if it has one.
    accept: str | None = None

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def to_json(self, value: Any) -> Any:
        return value

    def from_json(self, value: Any) -> Any:
        return value

    def body(self, value: Any, files: Any) -> Body | None:
        """The raw body/part for `value`, or None to send it as JSON."""
        return None

    async def from_payload(self, payload: Payload, files: Any) -> Any:
        """A whole response body (or one part of a multipart response)."""
        data = await payload.read()
        media = payload.media_type
        if media is None or is_json(media):
            return self.from_json(values.loads(data)) if data else None
        if media.startswith("text/"):
            return data.decode(charset_of(payload.headers.get("Content-Type")))
        return data

    def summary(self) -> str:
        return summarize(self.schema)


class TextKind(JsonKind):
    is_text = True


class DateTimeKind(JsonKind):
    trivial = False

    def from_json(self, value: Any) -> Any:
        return dt.datetime.fromisoformat(value) if isinstance(value, str) else value


class DurationKind(JsonKind):
    trivial = False

    def from_json(self, value: Any) -> Any:
        return _timedelta_adapter().validate_python(value) if value is not None else None


@functools.cache
def _timedelta_adapter() -> Any:
    return TypeAdapter(dt.timedelta)


class OptionalKind(JsonKind):
    def __init__(self, schema: dict[str, Any], inner: JsonKind) -> None:
        super().__init__(schema)
        self.inner = inner
        self.trivial = inner.trivial
        self.is_file = inner.is_file
        self.repeated_files = inner.repeated_files
        self.is_text = inner.is_text
        self.accept = inner.accept

    def to_json(self, value: Any) -> Any:
        return None if value is None else self.inner.to_json(value)

    def from_json(self, value: Any) -> Any:
        return None if value is None else self.inner.from_json(value)

    def body(self, value: Any, files: Any) -> Body | None:
        return None if value is None else self.inner.body(value, files)

    async def from_payload(self, payload: Payload, files: Any) -> Any:
        return await self.inner.from_payload(payload, files)

    def summary(self) -> str:
        return self.inner.summary()  # proto3 cannot say `| None` of a scalar: left out


class ListKind(JsonKind):
    trivial = False

    def __init__(self, schema: dict[str, Any], item: JsonKind) -> None:
        super().__init__(schema)
        self.item = item
        self.is_file = item.is_file
        self.repeated_files = item.is_file

    def to_json(self, value: Any) -> Any:
        if value is None or isinstance(value, str | bytes | dict):
            return value  # not a list: the server says what is wrong with it
        return [_at(i, self.item.to_json, v) for i, v in enumerate(value)]

    def from_json(self, value: Any) -> Any:
        if not isinstance(value, list):
            return value
        return [self.item.from_json(v) for v in value]


class MapKind(JsonKind):
    trivial = False

    def __init__(self, schema: dict[str, Any], value: JsonKind) -> None:
        super().__init__(schema)
        self.value = value

    def to_json(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: _at(k, self.value.to_json, v) for k, v in value.items()}

    def from_json(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: self.value.from_json(v) for k, v in value.items()}


class ObjectKind(JsonKind):
    """A model: an object whose properties have kinds of their own."""

    trivial = False

    def __init__(self, schema: dict[str, Any], props: dict[str, JsonKind]) -> None:
        super().__init__(schema)
        self.props = props
        self._special = {k: v for k, v in props.items() if not v.trivial}
        self.accept = next((k.accept for k in props.values() if k.accept), None)

    def prop(self, name: str) -> JsonKind:
        return self.props.get(name) or JsonKind({})

    def to_json(self, value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True)
        if not isinstance(value, dict):
            return value
        special = self._special
        return {k: _at(k, special[k].to_json, v) if k in special else v
                for k, v in value.items()}

    def from_json(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        special = self._special
        return {k: special[k].from_json(v) if k in special else v for k, v in value.items()}


class UnionKind(JsonKind):
    """`oneOf`/`anyOf` of several schemas; a discriminator picks the branch."""

    trivial = False

    def __init__(self, schema: dict[str, Any], branches: list[tuple[dict[str, Any], JsonKind]]
                 ) -> None:
        super().__init__(schema)
        self.branches = branches
        disc = schema.get("discriminator")
        self.tag_name = disc.get("propertyName") if isinstance(disc, dict) else None

    def _branch(self, value: Any) -> JsonKind | None:
        if self.tag_name is None or not isinstance(value, dict):
            return None
        tag = value.get(self.tag_name)
        if hasattr(tag, "value"):
            tag = tag.value
        for schema, kind in self.branches:
            prop = schema.get("properties", {}).get(self.tag_name, {})
            if prop.get("const") == tag or tag in prop.get("enum", ()):
                return kind
        return None

    def to_json(self, value: Any) -> Any:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True)
        kind = self._branch(value)
        return kind.to_json(value) if kind is not None else value

    def from_json(self, value: Any) -> Any:
        kind = self._branch(value)
        return kind.from_json(value) if kind is not None else value

    def summary(self) -> str:
        return " | ".join(k.summary() for _, k in self.branches)


def _at(key: str | int, to_json: Callable[[Any], Any], value: Any) -> Any:
    """`to_json(value)`, a FieldError located under `key` (an item, a property)."""
    try:
        return to_json(value)
    except FieldError as exc:
        raise exc.under(key) from None


def is_json(media: str | None) -> bool:
    return bool(media) and (media == "application/json" or media.endswith("+json"))


#: JSON Schema types by the Python names `list_apis()` uses on both protocols.
_PY_NAMES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool",
             "null": "None"}
_STRING_FORMATS = {"date-time": "datetime", "duration": "timedelta", "binary": "bytes"}


def summarize(schema: dict[str, Any]) -> str:
    """A short description of a schema node, for `list_apis()`.

    Python's names (`int`, `list[str]`, `dict[str, float]`, a model's name, `file`,
    `DataFrame`): the vocabulary the gRPC transport derives from descriptors too, so that
    both protocols describe an API alike. What only one contract can tell is left out
    (`| None`, which proto3 cannot say of a scalar; a string's format other than a
    datetime, a duration or bytes; a file's media type; a frame's orient).
    """
    if not isinstance(schema, dict):
        return "any"
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list):
        names = [summarize(a) for a in alternatives
                 if not (isinstance(a, dict) and a.get("type") == "null")]
        return " | ".join(dict.fromkeys(names)) or "None"
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    kind = schema.get("type")
    if kind == "file":
        return "bytes" if schema.get("format") == "bytes" else "file"
    if kind == "dataframe" or schema.get("format") == "pandas-dataframe":
        return "DataFrame"
    if kind == "array":
        items = schema.get("items")
        return f"list[{summarize(items)}]" if isinstance(items, dict) else "list"
    if kind == "object":
        if schema.get("properties"):
            return str(schema.get("title") or "object")
        extra = schema.get("additionalProperties")
        return f"dict[str, {summarize(extra)}]" if isinstance(extra, dict) else "dict"
    if kind == "string":
        return _STRING_FORMATS.get(schema.get("format") or "", "str")
    if isinstance(kind, list):
        return " | ".join(_PY_NAMES.get(k, k) for k in kind if k != "null") or "None"
    if isinstance(kind, str):
        return _PY_NAMES.get(kind, kind)
    return "any"


def fields_summary(fields: dict[str, str]) -> str:
    """`{summary: str, words: int}`: a model output, described by its fields (the
    gRPC contract names the response message, not the model)."""
    return "{" + ", ".join(f"{name}: {summary}" for name, summary in fields.items()) + "}"
