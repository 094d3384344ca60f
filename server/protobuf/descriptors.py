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
- the rpc of a root-input API carries `option (tensorwire.v1.root_input) = true;`;
- a streamed input (`AsyncIterator[T]`) makes the rpc client-streaming (`stream
  <Api>Request`, one element a message, in the field named after the parameter), and
  bidirectional when the output is a generator too;
- generated against a published file (a `ProtoLock`, see `lock`), fields and enum values
  keep their published numbers, new ones get numbers above any used before, and removed
  ones become `reserved`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    message_factory,
    struct_pb2,
    timestamp_pb2,
)
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from .. import v1 as tw_types
from ..codecs import Codec, ProtoType
from ..codecs.models import ModelCodec
from ..contract.descriptor import APISpec, ServiceSpec
from ..naming import camel, enum_value_names, snake, upper_snake
from .lock import Numbering, NumberLock, ProtoLock, load_lock
from .messages import APIMessages
from .text import render, uses_vocabulary

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
    numbering: Numbering


class _FileBuilder:
    """Builds one service's FileDescriptorProto; the `ProtoBuilder` codecs see."""

    def __init__(self, name: str, package: str, lock: ProtoLock | None = None) -> None:
        self.file = descriptor_pb2.FileDescriptorProto(name=name, package=package,
                                                       syntax="proto3")
        self.package = package
        self.lock = lock
        self._messages: list[_Message] = []
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
        # Values are listed in label order whatever their numbers (EnumProto relies on it).
        lock = self.lock.enum(name) if self.lock is not None else None
        numbering = self._numbering(name, lock, skip=None)
        numbering.set_aside(f"{prefix}_UNSPECIFIED", 0)
        for value_name in enum_value_names(prefix, values):
            enum.value.add(name=value_name, number=numbering.take(value_name))
        if lock is not None:
            ranges, names = lock.reserved_after({v.name for v in enum.value})
            for lo, hi in ranges:
                enum.reserved_range.add(start=lo, end=hi)  # inclusive in enums
            enum.reserved_name.extend(names)
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

    def _numbering(self, name: str, lock: NumberLock | None, **kw: Any) -> Numbering:
        return Numbering(name, lock, self.lock.source if self.lock is not None else "", **kw)

    def new_message(self, name: str, doc: str | None = None) -> _Sink:
        index = len(self.file.message_type)
        proto = self.file.message_type.add(name=name)
        if doc:
            self._comments[(_MESSAGE, index)] = doc
        lock = self.lock.message(name) if self.lock is not None else None
        msg = _Message(proto, index, self._numbering(name, lock))
        self._messages.append(msg)
        return _Sink(self, msg)

    def _reserve_removed(self) -> None:
        """What a locked message no longer has stays reserved, number and name."""
        for msg in self._messages:
            lock = msg.numbering.lock
            if lock is None:
                continue
            ranges, names = lock.reserved_after({f.name for f in msg.proto.field})
            for lo, hi in ranges:
                msg.proto.reserved_range.add(start=lo, end=hi + 1)  # end exclusive
            msg.proto.reserved_name.extend(names)

    def finish(self, spec: ServiceSpec, methods: list[tuple[APISpec, str, str]]) -> None:
        svc = self.file.service.add(name=camel(spec.name))
        if spec.doc and spec.doc.strip():
            self._comments[(_SERVICE, 0)] = spec.doc.strip()
        for i, (api, req, resp) in enumerate(methods):
            method = svc.method.add(name=camel(api.name), input_type=req, output_type=resp,
                                    client_streaming=api.stream_input is not None,
                                    server_streaming=api.output.stream)
            if api.is_root:  # what the request message alone cannot tell a client
                method.options.MergeFromString(tw_types.root_input_options())
            if api.doc:
                self._comments[(_SERVICE, 0, _METHOD, i)] = api.doc
        self._reserve_removed()
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
        """Declare fields in order; pinned and locked numbers are set aside before any
        automatic number is given."""
        numbering = self.msg.numbering
        numbers: list[int | None] = []
        for name, _, pin, _ in fields:
            if pin is not None:
                numbering.check_pin(name, pin)
            number = pin if pin is not None else numbering.locked(name)
            if number is not None:
                numbering.set_aside(name, number)
            numbers.append(number)
        for (name, codec, _, doc), number in zip(fields, numbers, strict=True):
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
        number = msg.numbering.take(name, number)
        hint = f"{msg.proto.name.removesuffix('Request').removesuffix('Response')}{camel(name)}"
        ptype = codec.proto.proto_type(self.builder, hint)
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
            options = ptype.map_value.options if ptype.map_value is not None else b""
        else:
            _set_type(fd, ptype)
            fd.label = FDP.LABEL_REPEATED if ptype.repeated else FDP.LABEL_OPTIONAL
            if not ptype.repeated and not ptype.is_message:
                fd.proto3_optional = True
                fd.oneof_index = len(msg.proto.oneof_decl)
                msg.proto.oneof_decl.add(name=f"_{name}")
            options = ptype.options
        if options:
            fd.options.MergeFromString(options)
        if doc:
            self.builder._comments[(_MESSAGE, msg.index, _FIELD, index)] = doc


def _set_type(fd: FDP, ptype: ProtoType) -> None:
    fd.type = ptype.type
    if ptype.type_name:
        fd.type_name = ptype.type_name


class ServiceProto:
    """One service's protobuf contract: its file, its pool and per-API message classes."""

    def __init__(self, spec: ServiceSpec, lock: ProtoLock | None = None) -> None:
        self.spec = spec
        #: The published numbers this contract keeps (None: declaration order).
        self.lock = lock
        package = spec.proto_package
        self.file_name = proto_file_name(spec)
        builder = _FileBuilder(self.file_name, package, lock)
        names: list[tuple[APISpec, str, str]] = []
        for api in spec.apis.values():
            names.append(self._declare_api(builder, api))
        builder.finish(spec, names)
        for option, value in file_options(spec).items():
            setattr(builder.file.options, option, value)
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
        required = {f.name for f in api.fields if f.required}
        for fd in req.msg.proto.field:  # what proto3's presence alone cannot tell a client
            if fd.name in required:
                fd.options.MergeFromString(tw_types.required_field_options())
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
        header = (f"{self.file_name}: the gRPC contract of the {self.spec.name} service.\n"
                  "Generated by `tensorwire proto`; do not edit.")
        if uses_vocabulary(self.file_proto):
            header = header.replace("do not edit.", "do not edit. The imported\n"
                                    "tensorwire/v1/types.proto is printed by `tensorwire "
                                    "proto --types`.")
        return render(self.file_proto, header=header)


def file_options(spec: ServiceSpec) -> dict[str, str]:
    """The generated file's `go_package`, `java_package` and `csharp_namespace`.

    Derived from the proto package unless `@service(...)` gave them, so that protoc's Go,
    Java and C# generators compile the file without `M` flags or a hand edit. Go: the
    package's directory, named by its last component (with the one before it when the last
    is a version, as buf does: `acme.gen.v1` -> `acme/gen/v1;genv1`), `pb` appended to an
    unversioned name; Java: the package; C#: the package in PascalCase.
    """
    parts = spec.proto_package.split(".")
    versioned = len(parts) > 1 and re.fullmatch(r"v\d+[0-9a-z_]*", parts[-1]) is not None
    name = "".join(parts[-2:] if versioned else parts[-1:]).replace("_", "")
    derived = {
        "go_package": f"{'/'.join(parts)};{name if versioned else name + 'pb'}",
        "java_package": spec.proto_package,
        "csharp_namespace": ".".join(camel(p) for p in parts),
    }
    return derived | spec.file_options


@functools.cache
def _well_known_proto(name: str) -> descriptor_pb2.FileDescriptorProto:
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


def proto_file_name(spec: ServiceSpec) -> str:
    """Where the service's .proto lives in a tree: `<package path>/<service>.proto`."""
    return f"{spec.proto_package.replace('.', '/')}/{snake(spec.name)}.proto"


@functools.cache
def service_proto(spec: ServiceSpec, lock: ProtoLock | None = None) -> ServiceProto:
    """The (cached) protobuf contract of a service, numbered by `lock` if one is given."""
    return ServiceProto(spec, lock)


def locked_service_proto(spec: ServiceSpec, published: str | None) -> ServiceProto:
    """The contract numbered as the `.proto` published in tree (or file) `published`;
    declaration order when None. Raises LockError (missing file, contradicting pin)."""
    if not published:
        return service_proto(spec)
    return service_proto(spec, load_lock(published, proto_file_name(spec)))
