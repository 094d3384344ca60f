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
from typing import Any

from pydantic import BaseModel, TypeAdapter

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
        return f"{self.inner.summary()} | null"


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
        return [self.item.to_json(v) for v in value]

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
        return {k: self.value.to_json(v) for k, v in value.items()}

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
        return {k: special[k].to_json(v) if k in special else v for k, v in value.items()}

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


def is_json(media: str | None) -> bool:
    return bool(media) and (media == "application/json" or media.endswith("+json"))


def summarize(schema: dict[str, Any]) -> str:
    """A short human description of a schema node, for `list_apis()`."""
    if not isinstance(schema, dict):
        return "any"
    alternatives = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alternatives, list):
        return " | ".join(summarize(a) for a in alternatives)
    kind = schema.get("type")
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if kind == "array":
        items = schema.get("items")
        return f"list[{summarize(items)}]" if isinstance(items, dict) else "list"
    if kind == "object":
        if schema.get("properties"):
            return str(schema.get("title") or "object")
        extra = schema.get("additionalProperties")
        return f"dict[str, {summarize(extra)}]" if isinstance(extra, dict) else "dict"
    if kind == "string" and schema.get("format"):
        return f"string ({schema['format']})"
    if kind == "file":
        return f"file ({schema.get('content_type') or schema.get('format') or 'binary'})"
    if isinstance(kind, str):
        return kind
    return "any"
