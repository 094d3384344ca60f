"""APISpec -> FileDescriptorProto -> message classes, in a private DescriptorPool.

No Python code is generated per service: the registry is turned into a descriptor once,
at start-up, and protobuf's message factory makes the classes. The same descriptor is
printed as `.proto` text (`prototext`), served by reflection and read by clients.

Wire-contract rules (stable, documented in the README):
- one `<Api>Request` per API with a field per input in declaration order, numbered
  1, 2, 3... (skipping numbers pinned with `FieldNumber`);
- `<Api>Response` holds a model output's fields, else one field `result`;
- every singular scalar/enum field has explicit presence (proto3 `optional`) so that a
  missing input is told apart from a zero value, exactly as in JSON;
- a repeated/map field has no presence: sent empty, it reads as absent for an input
  with a default (the default applies) and as empty for a required one;
- Python Enums and `Literal[str, ...]` become enums numbered from 1 (0 = unspecified);
- the rpc of a root-input API carries `option (tensorwire.v1.root_input) = true;`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from . import protowire
from . import v1 as tw_types
from .codecs import MISSING, Codec, FieldError, ProtoType
from .codecs.standard import ModelCodec, enum_value_names, upper_snake
from .sdk import ServiceSpec, snake
from .signature import camel
from .spec import APISpec, invalid_argument

_WELL_KNOWN_FILES = {
    "google.protobuf.Struct": "google/protobuf/struct.proto",
    "google.protobuf.Value": "google/protobuf/struct.proto",
    "google.protobuf.ListValue": "google/protobuf/struct.proto",
    "google.protobuf.Timestamp": "google/protobuf/timestamp.proto",
    "google.protobuf.Duration": "google/protobuf/duration.proto",
    "tensorwire.v1.Tensor": tw_types.PROTO_NAME,
    "tensorwire.v1.DataFrame": tw_types.PROTO_NAME,
    "tensorwire.v1.File": tw_types.PROTO_NAME,
}

# SourceCodeInfo path components (descriptor.proto field numbers).
_MESSAGE, _ENUM, _SERVICE, _FIELD, _METHOD = 4, 5, 6, 2, 2


@dataclass
class _Message:
    proto: descriptor_pb2.DescriptorProto
    index: int
    used_numbers: set[int] = field(default_factory=set)
    reserved: set[int] = field(default_factory=set)
    next_number: int = 1


class _FileBuilder:
    """Builds one service's FileDescriptorProto; the `ProtoBuilder` codecs see."""

    def __init__(self, name: str, package: str) -> None:
        self.file = descriptor_pb2.FileDescriptorProto(name=name, package=package,
                                                       syntax="proto3")
        self.package = package
        self._keys: dict[Any, str] = {}
        self._names: set[str] = set()
        self._imports: set[str] = {tw_types.PROTO_NAME}
        self._comments: dict[tuple[int, ...], str] = {}

    # -- ProtoBuilder protocol
    def message(self, key: Any, name_hint: str, fill: Callable[[Any], None],
                doc: str | None = None) -> str:
        if key in self._keys:
            return self._keys[key]
        name = self._unique(name_hint)
        full = self._keys[key] = f".{self.package}.{name}"
        sink = self.new_message(name, doc)
        fill(sink)
        return full

    def enum(self, key: Any, name_hint: str, values: list[str], doc: str | None = None) -> str:
        if key in self._keys:
            return self._keys[key]
        name = self._unique(name_hint)
        full = self._keys[key] = f".{self.package}.{name}"
        index = len(self.file.enum_type)
        enum = self.file.enum_type.add(name=name)
        prefix = upper_snake(name)
        enum.value.add(name=f"{prefix}_UNSPECIFIED", number=0)
        for number, value_name in enumerate(enum_value_names(prefix, values), start=1):
            enum.value.add(name=value_name, number=number)
        if doc:
            self._comments[(_ENUM, index)] = doc
        return full

    def well_known(self, name: str) -> str:
        self._imports.add(_WELL_KNOWN_FILES[name])
        return "." + name

    # -- building
    def _unique(self, hint: str) -> str:
        name = camel(hint) or "Message"
        candidate, n = name, 2
        while candidate in self._names:
            candidate, n = f"{name}{n}", n + 1
        self._names.add(candidate)
        return candidate

    def reserve(self, name: str) -> None:
        if name in self._names:
            raise TypeError(f"protobuf name {name!r} is used twice")
        self._names.add(name)

    def new_message(self, name: str, doc: str | None = None) -> _Sink:
        index = len(self.file.message_type)
        proto = self.file.message_type.add(name=name)
        if doc:
            self._comments[(_MESSAGE, index)] = doc
        return _Sink(self, _Message(proto, index))

    def finish(self, spec: ServiceSpec, methods: list[tuple[APISpec, str, str]]) -> None:
        svc = self.file.service.add(name=camel(spec.name))
        if spec.doc and spec.doc.strip():
            self._comments[(_SERVICE, 0)] = spec.doc.strip()
        for i, (api, req, resp) in enumerate(methods):
            method = svc.method.add(name=camel(api.name), input_type=req, output_type=resp,
                                    server_streaming=api.output.stream)
            if api.is_root:  # what the request message alone cannot tell a client
                method.options.MergeFromString(tw_types.root_input_options())
            if api.doc:
                self._comments[(_SERVICE, 0, _METHOD, i)] = api.doc
        self.file.dependency.extend(sorted(self._imports))
        info = self.file.source_code_info
        for path, text in sorted(self._comments.items()):
            loc = info.location.add()
            loc.path.extend(path)
            loc.leading_comments = " " + text.replace("\n", "\n ") + "\n"


class _Sink:
    """Adds fields to one message (the `MessageSink` codecs see)."""

    def __init__(self, builder: _FileBuilder, msg: _Message) -> None:
        self.builder = builder
        self.msg = msg

    def add_fields(self, fields: list[tuple[str, Codec, int | None, str | None]]) -> None:
        """Declare fields in order; pinned numbers are set aside before any auto number."""
        msg = self.msg
        pinned: set[int] = set()
        for name, _, number, _ in fields:
            if number is not None:
                if number in pinned or number in msg.used_numbers:
                    raise TypeError(f"{msg.proto.name}.{name}: field number {number} is "
                                    "already used")
                pinned.add(number)
        msg.reserved |= pinned
        for name, codec, number, doc in fields:
            self.add_field(name, codec, number=number, doc=doc)

    def add_oneof(self, oneof: str, fields: list[tuple[str, Codec, int | None, str | None]]
                  ) -> None:
        """Fields that form one `oneof` (message-typed variants of a union)."""
        msg = self.msg
        index = len(msg.proto.oneof_decl)
        msg.proto.oneof_decl.add(name=oneof)
        first = len(msg.proto.field)
        self.add_fields(fields)
        for fd in msg.proto.field[first:]:
            fd.oneof_index = index

    def add_field(self, name: str, codec: Codec, *, number: int | None = None,
                  doc: str | None = None) -> None:
        msg = self.msg
        if number is None:
            number = self._auto_number()
        elif number in msg.used_numbers:
            raise TypeError(f"{msg.proto.name}.{name}: field number {number} is already used")
        msg.used_numbers.add(number)
        hint = f"{msg.proto.name.removesuffix('Request').removesuffix('Response')}{camel(name)}"
        ptype = codec.proto_type(self.builder, hint)
        index = len(msg.proto.field)
        fd = msg.proto.field.add(name=name, number=number, json_name=name)
        if ptype.map_key is not None:
            entry = msg.proto.nested_type.add(name=f"{camel(name)}Entry")
            entry.options.map_entry = True
            _set_type(entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL),
                      ptype.map_key)
            _set_type(entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL),
                      ptype.map_value)
            fd.label = FDP.LABEL_REPEATED
            fd.type = FDP.TYPE_MESSAGE
            fd.type_name = f".{self.builder.package}.{msg.proto.name}.{entry.name}"
        else:
            _set_type(fd, ptype)
            fd.label = FDP.LABEL_REPEATED if ptype.repeated else FDP.LABEL_OPTIONAL
            if not ptype.repeated and not ptype.is_message:
                fd.proto3_optional = True
                fd.oneof_index = len(msg.proto.oneof_decl)
                msg.proto.oneof_decl.add(name=f"_{name}")
        if doc:
            self.builder._comments[(_MESSAGE, msg.index, _FIELD, index)] = doc

    def _auto_number(self) -> int:
        msg = self.msg
        n = msg.next_number
        while n in msg.used_numbers or n in msg.reserved or 19_000 <= n <= 19_999:
            n += 1
        msg.next_number = n + 1
        return n


def _set_type(fd: FDP, ptype: ProtoType) -> None:
    fd.type = ptype.type
    if ptype.type_name:
        fd.type_name = ptype.type_name


class Parsed:
    """A parsed request whose big bytes fields were cut out of the wire (see protowire)."""

    __slots__ = ("msg", "raw")

    def __init__(self, msg: Any, raw: dict[str, memoryview]) -> None:
        self.msg = msg
        self.raw = raw


class APIMessages:
    """The request/response classes of one API and the conversions to and from them.

    `parse_request` / `request_values` / `response_bytes` are the server's path, and
    `request_bytes` / `parse_response` the client's: both move big bytes fields
    (`Codec.raw_bytes_field`) without copies through `protowire`. The message-level
    `response` / `request` / `response_value` build and read ordinary messages.
    """

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
        self._request_split = protowire.split_fields(
            request_cls, [(f.name, f.codec) for f in api.fields])
        self._response_split = protowire.split_fields(
            response_cls, [(name, c) for name, _, c in self._response_fields])

    # server side
    def parse_request(self, data: bytes) -> Any:
        try:
            data, raw = protowire.split(data, self._request_split)
            msg = self.request_cls.FromString(data)
        except Exception:
            raise invalid_argument(FieldError("the request is not a valid "
                                              f"{self.request_cls.DESCRIPTOR.full_name} "
                                              "protobuf message")) from None
        return Parsed(msg, raw) if raw else msg

    def request_values(self, msg: Any) -> dict[str, Any]:
        """Python values of the request's fields (missing ones left out), not validated.

        An empty repeated/map field of an input with a default counts as missing.
        """
        msg, raw = (msg.msg, msg.raw) if isinstance(msg, Parsed) else (msg, {})
        out: dict[str, Any] = {}
        for name, codec, empty_is_missing in self._request_fields:
            try:
                value = _read(codec, msg, name, raw)
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
            codec.fill_proto(value, msg)
        else:
            codec.write_field(msg, "result", value)
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

    # client side
    def request(self, values: dict[str, Any]) -> Any:
        msg = self.request_cls()
        for f in self.api.fields:
            if f.name in values:
                try:
                    f.codec.write_field(msg, f.name, values[f.name])
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

    def response_value(self, msg: Any) -> Any:
        codec = self.api.output.codec
        if self._model_output:
            return codec.from_proto(msg)
        value = codec.read_field(msg, "result")
        return None if value is MISSING else value

    def parse_response(self, data: bytes) -> Any:
        """`response_value` straight from the received bytes (big fields as views)."""
        data, raw = protowire.split(data, self._response_split)
        msg = self.response_cls.FromString(data)
        if not raw:
            return self.response_value(msg)
        out: dict[str, Any] = {}
        for name, key, codec in self._response_fields:
            try:
                value = _read(codec, msg, name, raw)
            except FieldError as exc:
                raise exc.under(key) from None
            if value is not MISSING:
                out[key] = value
        return out if self._model_output else out.get("result")


def _read(codec: Codec, msg: Any, name: str, raw: dict[str, memoryview]) -> Any:
    data = raw.get(name)
    if data is None:
        return codec.read_field(msg, name)
    return codec.from_proto_split(getattr(msg, name), data)


def _serialize(msg: Any, values: list[tuple[str, Codec, Any]],
               split: dict[int, protowire.SplitField]) -> bytes:
    by_name = {f.name: f for f in split.values()}
    tail: list[Any] = []
    for name, codec, value in values:
        split_field = by_name.get(name)
        try:
            if split_field is None or value is None:
                codec.write_field(msg, name, value)
                continue
            element = getattr(msg, name)
            payload = codec.fill_proto_split(value, element)
        except FieldError as exc:
            raise exc.under(name) from None
        if payload is not None:  # the element goes out whole, once (see protowire)
            tail += protowire.fragment(split_field, payload, element.SerializeToString())
            msg.ClearField(name)
    head = msg.SerializeToString()
    return b"".join([head, *tail]) if tail else head


class ServiceProto:
    """One service's protobuf contract: its file, its pool and per-API message classes."""

    def __init__(self, spec: ServiceSpec) -> None:
        self.spec = spec
        package = spec.proto_package
        self.file_name = f"{package.replace('.', '/')}/{snake(spec.name)}.proto"
        builder = _FileBuilder(self.file_name, package)
        names: list[tuple[APISpec, str, str]] = []
        for api in spec.apis.values():
            names.append(self._declare_api(builder, api))
        builder.finish(spec, names)
        self.file_proto = builder.file
        self.pool = descriptor_pool.DescriptorPool()
        for dep in _dependency_protos(self.file_proto):
            self.pool.Add(dep)
        self.pool.Add(self.file_proto)
        self.messages: dict[str, APIMessages] = {}
        for api, req, resp in names:
            self.messages[api.name] = APIMessages(
                api,
                message_factory.GetMessageClass(self.pool.FindMessageTypeByName(req[1:])),
                message_factory.GetMessageClass(self.pool.FindMessageTypeByName(resp[1:])),
            )

    @staticmethod
    def _declare_api(builder: _FileBuilder, api: APISpec) -> tuple[APISpec, str, str]:
        base = camel(api.name)
        req_name, resp_name = f"{base}Request", f"{base}Response"
        builder.reserve(req_name)
        builder.reserve(resp_name)
        req = builder.new_message(req_name)
        req.add_fields([(f.name, f.codec, f.number, f.doc) for f in api.fields])
        resp = builder.new_message(resp_name)
        codec = api.output.codec
        if isinstance(codec, ModelCodec):
            resp.add_fields([(f.name, f.codec, f.number, f.doc) for f in codec.fields])
        else:
            resp.add_field("result", codec)
        pkg = builder.package
        return api, f".{pkg}.{req_name}", f".{pkg}.{resp_name}"

    @property
    def method_names(self) -> dict[str, str]:
        """API name -> gRPC method path (`/pkg.Service/Method`)."""
        svc = self.spec.grpc_service_name
        return {name: f"/{svc}/{camel(name)}" for name in self.spec.apis}

    def proto_text(self) -> str:
        from .prototext import render

        header = (f"{self.file_name}: the gRPC contract of the {self.spec.name} service.\n"
                  "Generated by `tensorwire proto`; do not edit. The imported\n"
                  "tensorwire/v1/types.proto is printed by `tensorwire proto --types`.")
        return render(self.file_proto, header=header)


@functools.cache
def _well_known_proto(name: str) -> descriptor_pb2.FileDescriptorProto:
    from google.protobuf import duration_pb2, struct_pb2, timestamp_pb2

    module = {
        "google/protobuf/struct.proto": struct_pb2,
        "google/protobuf/timestamp.proto": timestamp_pb2,
        "google/protobuf/duration.proto": duration_pb2,
    }[name]
    fp = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fp)
    return fp


def _dependency_protos(file_proto: descriptor_pb2.FileDescriptorProto):
    for dep in file_proto.dependency:
        if dep == tw_types.PROTO_NAME:
            yield from tw_types.FILE_PROTOS  # types.proto after its own imports
        else:
            yield _well_known_proto(dep)


@functools.cache
def service_proto(spec: ServiceSpec) -> ServiceProto:
    """The (cached) protobuf contract of a service."""
    return ServiceProto(spec)
