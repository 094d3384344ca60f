"""Time: `datetime` and `timedelta`, as JSON strings and protobuf well-known types."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..wire.wellknown import (
    datetime_to_timestamp,
    duration_to_timedelta,
    timedelta_to_duration,
    timestamp_to_datetime,
)
from .core import Codec, Scope
from .http_facet import HttpFacet
from .proto_facet import MessageProto
from .v2_facet import TextV2


class TimestampProto(MessageProto):
    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, "google.protobuf.Timestamp")

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return timestamp_to_datetime(raw)

    def fill(self, value: Any, msg: Any) -> None:
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        datetime_to_timestamp(value, msg)


class DatetimeCodec(Codec):
    """`datetime`: RFC 3339 in JSON, `google.protobuf.Timestamp` (UTC) in protobuf."""

    validates_output = True
    output_types = dt.datetime

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.http = HttpFacet(self)
        self.proto = TimestampProto(self)
        self.v2 = TextV2(self)


class DurationProto(MessageProto):
    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, "google.protobuf.Duration")

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return duration_to_timedelta(raw)

    def fill(self, value: Any, msg: Any) -> None:
        timedelta_to_duration(value, msg)


class TimedeltaCodec(Codec):
    """`timedelta`: ISO 8601 duration in JSON, `google.protobuf.Duration` in protobuf."""

    validates_output = True
    output_types = dt.timedelta

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        super().__init__(python_type, annotation)
        self.http = HttpFacet(self)
        self.proto = DurationProto(self)
        self.v2 = TextV2(self)
