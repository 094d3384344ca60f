"""gRPC side: what each input/output is, read from descriptors got by reflection.

A *field kind* (built by `kinds.field_kind(field_descriptor)`) writes a Python value into a field of
a request message and reads a response field back into Python: scalars (checked with
pydantic's lax rules, so a wrong type fails here exactly as the HTTP server would say),
enums (by value name), well-known types (Timestamp, Duration, Struct, Value), nested
messages (models -> dicts; a `oneof` union picks its variant by the discriminator),
repeated fields and maps. Messages of the fixed vocabulary (`tensorwire.v1.Tensor`,
`.File`, `.DataFrame`) have elements of their own, listed in `kinds`.

Errors found while encoding are `InvalidArgument` at the field's location, the same
class and `loc` the server reports for the same mistake over HTTP.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import re
from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from pydantic import TypeAdapter, ValidationError

from .. import v1
from ..errors import InvalidArgument
from ..naming import upper_snake
from ..wire import wellknown as wkt
from ..wire.field_error import FieldError, invalid_argument
from . import jsonkinds, values
from .filedata import file_body, is_pil_image, read_body

Loc = tuple[str | int, ...]


def invalid(loc: Loc, msg: str, type: str = "value_error") -> InvalidArgument:
    return InvalidArgument.at(list(loc), msg, type)


class Violations:
    """Collects the errors of several fields/items, so that (like pydantic on the
    server) one call reports every input it could not encode, not just the first."""

    def __init__(self) -> None:
        self.detail: list[Any] = []

    def run(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except InvalidArgument as exc:
            self.detail.extend(exc.detail or [{"loc": [], "msg": exc.message,
                                               "type": "value_error"}])

    def check(self) -> None:
        if not self.detail:
            return
        first = self.detail[0]
        where = ".".join(str(p) for p in first["loc"])
        summary = f"{where}: {first['msg']}" if where else first["msg"]
        if len(self.detail) > 1:
            summary += f" (and {len(self.detail) - 1} more)"
        raise InvalidArgument(summary, detail=self.detail)


# ---------------------------------------------------------------------- elements


class Element:
    """One element of a field (the whole field when singular, an item when repeated)."""

    is_message = False

    def encode(self, value: Any, loc: Loc) -> Any:
        """The proto scalar for `value` (scalar/enum elements)."""
        raise NotImplementedError

    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        """Write `value` into the sub-message `msg` (message elements)."""
        raise NotImplementedError

    def decode(self, raw: Any, files: Any) -> Any:
        return raw

    def hinted(self, hints: v1.FieldHints) -> Element:
        """This element as the field's tensorwire options describe it (a Tensor's
        dtype and shape); by default options change nothing."""
        return self

    def summary(self) -> str:
        return "value"


_PY_TYPES: dict[int, type] = {
    FieldDescriptor.TYPE_STRING: str, FieldDescriptor.TYPE_BYTES: bytes,
    FieldDescriptor.TYPE_BOOL: bool,
    FieldDescriptor.TYPE_DOUBLE: float, FieldDescriptor.TYPE_FLOAT: float,
}
_INT_RANGES: dict[int, tuple[int, int]] = {
    FieldDescriptor.TYPE_INT64: (-(2 ** 63), 2 ** 63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2 ** 63), 2 ** 63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2 ** 63), 2 ** 63 - 1),
    FieldDescriptor.TYPE_INT32: (-(2 ** 31), 2 ** 31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2 ** 31), 2 ** 31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2 ** 31), 2 ** 31 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2 ** 64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2 ** 64 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2 ** 32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2 ** 32 - 1),
}
_TYPE_NAMES = {
    FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_BOOL: "bool", FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float", FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_UINT32: "uint32",
}
#: What `list_apis()` calls a scalar: Python's names, as the HTTP transport does.
_PY_NAMES = {int: "int", float: "float", str: "str", bytes: "bytes", bool: "bool"}


@functools.cache
def _adapter(tp: type) -> Any:
    return TypeAdapter(tp)


def lax(tp: Any, value: Any, loc: Loc) -> Any:
    """`value` as `tp` under pydantic's lax rules, or the server's InvalidArgument."""
    try:
        return _adapter(tp).validate_python(value)
    except ValidationError as exc:
        raise invalid_argument(exc, prefix=loc) from None


class Scalar(Element):
    def __init__(self, proto_type: int) -> None:
        self.proto_type = proto_type
        self.range = _INT_RANGES.get(proto_type)
        self.py_type = int if self.range else _PY_TYPES.get(proto_type, str)

    def encode(self, value: Any, loc: Loc) -> Any:
        if self.py_type is bytes and not isinstance(value, bytes | bytearray | str):
            value = _file_bytes(value, loc)  # a Path, open file, image: as over HTTP
        if type(value) is not self.py_type:
            value = lax(self.py_type, value, loc)
        if self.range is not None and not self.range[0] <= value <= self.range[1]:
            raise invalid(loc, f"{value} is out of range for "
                           f"{_TYPE_NAMES.get(self.proto_type, 'this integer type')}",
                           "int_out_of_range")
        return value

    def summary(self) -> str:
        return _PY_NAMES.get(self.py_type, "any")


class JsonText(Scalar):
    """A string field holding one JSON text (`(tensorwire.v1.json_schema)`): `Any`,
    untyped dicts, nested lists. Written and read by the same JSON code as the HTTP
    transport, so a value comes back the same on both protocols (64 stays an int)."""

    def __init__(self, schema_text: str) -> None:
        super().__init__(FieldDescriptor.TYPE_STRING)
        try:
            schema = values.loads(schema_text)
        except ValueError:
            schema = {}
        self.schema = schema if isinstance(schema, dict) else {}

    def encode(self, value: Any, loc: Loc) -> Any:
        try:
            return values.dumps(value).decode()
        except TypeError as exc:
            raise invalid(loc, str(exc), "json_type") from None

    def decode(self, raw: Any, files: Any) -> Any:
        return values.loads(raw) if raw else None

    def summary(self) -> str:
        return jsonkinds.summarize(self.schema)


def _file_bytes(value: Any, loc: Loc) -> Any:
    """The content of a file-like input to a `bytes` field (else `value` unchanged)."""
    if isinstance(value, os.PathLike | tuple) or hasattr(value, "read") or is_pil_image(value):
        try:
            return read_body(file_body(value))
        except InvalidArgument as exc:
            raise invalid(loc, exc.message, "bytes_type") from None
    return value


def _label_key(label: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "_", label).strip("_").upper()


class Enum(Element):
    """A generated enum: value names are `<ENUM>_<LABEL>`; 0 is "unspecified".

    Reflection carries value names, not the Python values behind them, so outputs read
    as the label in lower case (`SENTIMENT_POSITIVE` -> "positive"), which is the value
    of the usual lower-case `Enum`/`Literal`. Inputs accept the value, the member or its
    name, matched case-insensitively.
    """

    def __init__(self, desc: EnumDescriptor) -> None:
        self.desc = desc
        self.prefix = upper_snake(desc.name) + "_"
        self.numbers = {v.name: v.number for v in desc.values}
        self.labels = {v.number: v.name.removeprefix(self.prefix).lower()
                       for v in desc.values if v.number != 0}

    def encode(self, value: Any, loc: Loc) -> Any:
        candidates = []
        if isinstance(value, str):
            candidates.append(value)
        else:
            for attr in ("value", "name"):  # an enum.Enum member
                v = getattr(value, attr, None)
                if isinstance(v, str):
                    candidates.append(v)
        for c in candidates:
            number = self.numbers.get(self.prefix + _label_key(c))
            if number is not None:
                return number
        expected = ", ".join(repr(v) for v in self.labels.values())
        raise invalid(loc, f"Input should be {expected}", "enum")

    def decode(self, raw: Any, files: Any) -> Any:
        return self.labels.get(raw, raw) if raw else None

    def summary(self) -> str:
        return " | ".join(repr(v) for v in self.labels.values())


class Message(Element):
    is_message = True


class Timestamp(Message):
    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        if not isinstance(value, dt.datetime):
            value = lax(dt.datetime, value, loc)
        wkt.datetime_to_timestamp(value, msg)

    def decode(self, raw: Any, files: Any) -> Any:
        return wkt.timestamp_to_datetime(raw)

    def summary(self) -> str:
        return "datetime"


class Duration(Message):
    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        if not isinstance(value, dt.timedelta):
            value = lax(dt.timedelta, value, loc)
        wkt.timedelta_to_duration(value, msg)

    def decode(self, raw: Any, files: Any) -> Any:
        return wkt.duration_to_timedelta(raw)

    def summary(self) -> str:
        return "timedelta"


class Struct(Message):
    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        data = values.jsonable(value)
        if not isinstance(data, dict):
            raise invalid(loc, "Input should be a valid dictionary", "dict_type")
        try:
            wkt.python_to_struct(data, msg)
        except FieldError as exc:
            raise invalid((*loc, *exc.loc), exc.msg, exc.type) from None

    def decode(self, raw: Any, files: Any) -> Any:
        return wkt.struct_to_python(raw)

    def summary(self) -> str:
        return "dict"


class Value(Message):
    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        try:
            wkt.python_to_value(values.jsonable(value), msg)
        except FieldError as exc:
            raise invalid((*loc, *exc.loc), exc.msg, exc.type) from None
        except TypeError as exc:
            raise invalid(loc, str(exc), "json_type") from None

    def decode(self, raw: Any, files: Any) -> Any:
        return wkt.value_to_python(raw)

    def summary(self) -> str:
        return "any"


class ListValue(Message):
    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        data = values.jsonable(value)
        if not isinstance(data, list):
            raise invalid(loc, "Input should be a valid list", "list_type")
        for item in data:
            wkt.python_to_value(item, msg.values.add())

    def decode(self, raw: Any, files: Any) -> Any:
        return [wkt.value_to_python(v) for v in raw.values]

    def summary(self) -> str:
        return "list"
