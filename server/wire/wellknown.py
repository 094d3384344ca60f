"""google.protobuf Value/Struct/ListValue/Timestamp/Duration <-> Python values.

Written against the message fields rather than the well-known-type mixins, because our
messages live in a private descriptor pool where those mixins are not guaranteed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from .field_error import FieldError

_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)


def value_to_python(msg: Any) -> Any:
    kind = msg.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "struct_value":
        return struct_to_python(msg.struct_value)
    if kind == "list_value":
        return [value_to_python(v) for v in msg.list_value.values]
    return getattr(msg, kind)


def struct_to_python(msg: Any) -> dict[str, Any]:
    return {k: value_to_python(v) for k, v in msg.fields.items()}


def python_to_value(value: Any, msg: Any) -> None:
    """Fill a `google.protobuf.Value` from a JSON-able Python value."""
    if value is None:
        msg.null_value = 0
    elif isinstance(value, bool):
        msg.bool_value = value
    elif isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise FieldError("NaN and infinity have no google.protobuf.Value form")
        msg.number_value = value
    elif isinstance(value, str):
        msg.string_value = value
    elif isinstance(value, Mapping):
        python_to_struct(value, msg.struct_value)
    elif isinstance(value, list | tuple):
        values = msg.list_value.values
        for item in value:
            python_to_value(item, values.add())
        if not value:
            msg.list_value.SetInParent()
    else:
        raise FieldError(f"{type(value).__name__} has no google.protobuf.Value form")


def python_to_struct(value: Mapping[str, Any], msg: Any) -> None:
    msg.SetInParent()
    for key, item in value.items():
        if not isinstance(key, str):
            raise FieldError(f"Struct keys must be strings, got {type(key).__name__}")
        python_to_value(item, msg.fields[key])


def timestamp_to_datetime(msg: Any) -> dt.datetime:
    return _EPOCH + dt.timedelta(seconds=msg.seconds, microseconds=msg.nanos // 1000)


def datetime_to_timestamp(value: dt.datetime, msg: Any) -> None:
    if value.tzinfo is None:
        value = value.replace(tzinfo=_UTC)
    delta = value - _EPOCH
    seconds = delta.days * 86400 + delta.seconds
    msg.seconds = seconds
    msg.nanos = delta.microseconds * 1000


def duration_to_timedelta(msg: Any) -> dt.timedelta:
    return dt.timedelta(seconds=msg.seconds, microseconds=msg.nanos // 1000)


def timedelta_to_duration(value: dt.timedelta, msg: Any) -> None:
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    seconds = int(micros / 1_000_000)  # toward zero: seconds and nanos share a sign
    msg.seconds = seconds
    msg.nanos = (micros - seconds * 1_000_000) * 1000
