"""One API's request and response messages, and the conversions to and from values.

`parse_request` / `request_values` / `response_bytes` are the server's path, and
`request_bytes` / `parse_response` a client's: both move big bytes fields
(`raw_bytes_field`, the data of a tensor) without copies through `bytes_fields`. The
message-level `response` / `request` / `response_value` build and read ordinary
messages. Values are read and written by each field's codec (its `proto` facet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..codecs import MISSING, REPLY, Codec, Scope
from ..codecs.models import ModelCodec, ModelProto
from ..contract.descriptor import APISpec
from ..wire.field_error import FieldError, invalid_argument
from . import bytes_fields


class Parsed:
    """A parsed request whose big bytes fields were cut out of the wire (see bytes_fields)."""

    __slots__ = ("msg", "raw")

    def __init__(self, msg: Any, raw: dict[str, memoryview]) -> None:
        self.msg = msg
        self.raw = raw


class APIMessages:
    """The request/response classes of one API and the conversions to and from them."""

    def __init__(self, api: APISpec, request_cls: type, response_cls: type) -> None:
        self.api = api
        self.request_cls = request_cls
        self.response_cls = response_cls
        self._model_output = isinstance(api.output.codec, ModelCodec)
        codec = api.output.codec
        self._response_fields: list[tuple[str, str, Codec]] = (
            [(f.name, f.key, f.codec) for f in codec.fields] if self._model_output
            else [("result", "result", codec)])
        # proto3 cannot tell an empty repeated/map field from an absent one: for an input
        # with a default, empty reads as absent so that the default applies (as a key
        # left out of a JSON body). A required one sent empty stays empty.
        self._request_fields = [(f.name, f.codec, f.codec.is_container and not f.required)
                                for f in api.fields]
        self._request_split = bytes_fields.split_fields(
            request_cls, [(f.name, f.codec) for f in api.fields])
        self._response_split = bytes_fields.split_fields(
            response_cls, [(name, c) for name, _, c in self._response_fields])

    # server side
    def parse_request(self, data: bytes) -> Any:
        try:
            data, raw = bytes_fields.split(data, self._request_split)
            msg = self.request_cls.FromString(data)
        except Exception:
            raise self._not_a_request() from None
        return Parsed(msg, raw) if raw else msg

    def _not_a_request(self) -> Exception:
        return invalid_argument(FieldError("the request is not a valid "
                                           f"{self.request_cls.DESCRIPTOR.full_name} "
                                           "protobuf message"))

    def request_reader(self) -> Callable[[bytes, Scope], dict[str, Any]]:
        """`request_values(parse_request(data), scope)` with this API's facts bound, for
        a handler compiled per API.

        Where every input is a singular scalar read as the message holds it (no bytes
        field cut out by `bytes_fields`, no container, no message, a facet that
        `reads_as_held`), the values are the fields the sender set, read
        in one comprehension: a small request's fields had each gone through `_read`,
        `read_field` and `from_proto`, a fifth of the compiled gRPC handler's time.
        """
        def general(data: bytes, scope: Scope) -> dict[str, Any]:
            return self.request_values(self.parse_request(data), scope)

        if self._request_split or not all(_read_as_held(f.codec) for f in self.api.fields):
            return general
        from_string = self.request_cls.FromString
        names = tuple(f.name for f in self.api.fields)
        not_a_request = self._not_a_request

        def read_scalars(data: bytes, scope: Scope) -> dict[str, Any]:
            try:
                msg = from_string(data)
            except Exception:
                raise not_a_request() from None
            return {name: getattr(msg, name) for name in names if msg.HasField(name)}

        return read_scalars

    def request_values(self, msg: Any, scope: Scope) -> dict[str, Any]:
        """Python values of the request's fields (missing ones left out), not validated.

        An empty repeated/map field of an input with a default counts as missing.
        `scope` is the request's (`Context`): uploaded files go to its temp dir.
        """
        msg, raw = (msg.msg, msg.raw) if isinstance(msg, Parsed) else (msg, {})
        out: dict[str, Any] = {}
        for name, codec, empty_is_missing in self._request_fields:
            try:
                value = _read(codec, msg, name, raw, scope)
            except FieldError as exc:
                raise invalid_argument(exc.under(name)) from None
            if value is not MISSING and not (empty_is_missing and not value):
                out[name] = value
        return out

    def response(self, value: Any) -> Any:
        msg = self.response_cls()
        codec = self.api.output.codec
        value = codec.output_value(value)  # what HTTP writes too: checked, defaults filled
        if self._model_output:
            codec.proto.fill(value, msg)
        else:
            codec.proto.write_field(msg, "result", value)
        return msg

    def response_bytes(self, value: Any) -> bytes:
        """The serialised response: `response(value)`, with big bytes fields copied once."""
        if not self._response_split:
            return self.response(value).SerializeToString()
        value = self.api.output.codec.output_value(value)
        if self._model_output:
            values = [(name, codec, getattr(value, name, None))
                      for name, _, codec in self._response_fields]
        else:
            values = [("result", self.api.output.codec, value)]
        return _serialize(self.response_cls(), values, self._response_split)

    def response_encoder(self) -> Callable[[Any], bytes]:
        """`response_bytes` with this API's facts bound, for a handler compiled per API
        (and per message of a stream): a singular scalar result (str, int, float, bool,
        bytes), or a model of such fields, is one constructor call; every other output
        is `response_bytes`."""
        codec = self.api.output.codec
        proto = codec.proto
        if self._model_output and not self._response_split:
            return self._model_encoder()
        if (self._model_output or self._response_split or proto.element_is_message
                or not proto.writes_as_converted):
            return self.response_bytes
        cls, output_value, to_proto = self.response_cls, codec.output_value, proto.to_proto

        def encode(value: Any) -> bytes:
            value = output_value(value)  # what HTTP writes too: checked
            if value is None:
                return cls().SerializeToString()
            return cls(result=to_proto(value)).SerializeToString()

        verbatim = proto.verbatim_type()
        if verbatim is None:
            return encode

        def encode_verbatim(value: Any) -> bytes:
            if type(value) is verbatim:  # a token stream's str: written as it is
                return cls(result=value).SerializeToString()
            return encode(value)

        return encode_verbatim

    def _model_encoder(self) -> Callable[[Any], bytes]:
        """A model output whose fields are singular scalars written as they are (their
        facets' `writes_as_converted`): the message made in one constructor call from
        the fields that are not None, as `ModelProto.fill` would set them one by one."""
        codec = self.api.output.codec
        proto = codec.proto
        if not (isinstance(proto, ModelProto) and proto.fills_field_by_field) or not all(
                _written_as_is(f.codec) for f in codec.fields):
            return self.response_bytes
        cls, output_value, general = self.response_cls, codec.output_value, self.response_bytes
        fields = tuple((f.name, f.codec.proto.to_proto) for f in codec.fields)

        def encode_model(value: Any) -> bytes:
            value = output_value(value)  # what HTTP writes too: checked
            if isinstance(value, dict):  # a dict the codec passes unchecked
                return general(value)
            values: dict[str, Any] = {}
            for name, to_proto in fields:
                item = getattr(value, name, None)
                if item is not None:
                    try:
                        values[name] = to_proto(item)
                    except FieldError as exc:
                        raise exc.under(name) from None
            return cls(**values).SerializeToString()

        return encode_model

    # client side
    def request(self, values: dict[str, Any]) -> Any:
        msg = self.request_cls()
        for f in self.api.fields:
            if f.name in values:
                try:
                    f.codec.proto.write_field(msg, f.name, values[f.name])
                except FieldError as exc:
                    raise invalid_argument(exc.under(f.name)) from None
        return msg

    def request_bytes(self, values: dict[str, Any]) -> bytes:
        """The serialised request: `request(values)`, with big bytes fields copied once."""
        items = [(f.name, f.codec, values[f.name]) for f in self.api.fields if f.name in values]
        try:
            return _serialize(self.request_cls(), items, self._request_split)
        except FieldError as exc:
            raise invalid_argument(exc) from None

    def response_value(self, msg: Any, scope: Scope = REPLY) -> Any:
        codec = self.api.output.codec
        if self._model_output:
            return codec.proto.from_proto(msg, scope)
        value = codec.proto.read_field(msg, "result", scope)
        return None if value is MISSING else value

    def parse_response(self, data: bytes, scope: Scope = REPLY) -> Any:
        """`response_value` straight from the received bytes (big fields as views)."""
        data, raw = bytes_fields.split(data, self._response_split)
        msg = self.response_cls.FromString(data)
        if not raw:
            return self.response_value(msg, scope)
        out: dict[str, Any] = {}
        for name, key, codec in self._response_fields:
            try:
                value = _read(codec, msg, name, raw, scope)
            except FieldError as exc:
                raise exc.under(key) from None
            if value is not MISSING:
                out[key] = value
        return out if self._model_output else out.get("result")


def _read_as_held(codec: Codec) -> bool:
    """Whether `codec`'s field reads as `getattr(msg, name)` when `msg.HasField(name)`
    (and as MISSING otherwise): a singular scalar whose facet `reads_as_held`."""
    facet = codec.proto
    return (not codec.is_container and not facet.element_is_message
            and facet.reads_as_held)


def _written_as_is(codec: Codec) -> bool:
    """Whether `codec`'s field is written as `setattr(msg, name, to_proto(value))` when
    the value is not None: a singular scalar whose facet `writes_as_converted`."""
    facet = codec.proto
    return (not codec.is_container and not facet.element_is_message
            and facet.writes_as_converted)


def _read(codec: Codec, msg: Any, name: str, raw: dict[str, memoryview], scope: Scope
          ) -> Any:
    data = raw.get(name)
    if data is None:
        return codec.proto.read_field(msg, name, scope)
    return codec.proto.from_split(getattr(msg, name), data, scope)


def _serialize(msg: Any, values: list[tuple[str, Codec, Any]],
               split: dict[int, bytes_fields.SplitField]) -> bytes:
    by_name = {f.name: f for f in split.values()}
    tail: list[Any] = []
    for name, codec, value in values:
        split_field = by_name.get(name)
        try:
            if split_field is None or value is None:
                codec.proto.write_field(msg, name, value)
                continue
            element = getattr(msg, name)
            payload = codec.proto.fill_split(value, element)
        except FieldError as exc:
            raise exc.under(name) from None
        if payload is not None:  # the element goes out whole, once (see bytes_fields)
            tail += bytes_fields.fragment(split_field, payload, element.SerializeToString())
            msg.ClearField(name)
    head = msg.SerializeToString()
    return b"".join([head, *tail]) if tail else head
