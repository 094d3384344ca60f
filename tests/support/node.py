"""Node.js gRPC clients in tests: @grpc/grpc-js + @grpc/proto-loader (protobufjs).

protobufjs is the decoder behind Node clients, grpc-web in browsers and many generated
TypeScript clients, and it reads the wire more strictly than Python's runtime (a
singular message field sent twice keeps only its last occurrence), so these tests see
what the Python-only tests cannot.

- `node_modules(request)`: a directory with the two npm packages installed (kept between
  runs when pytest's cache is on); skips the test when node or npm is absent.
- `write_protos(directory, spec)`: the service's `.proto` and tensorwire/v1/types.proto,
  laid out for proto-loader's `includeDirs`.
- `to_js(msg)` / `from_js(obj, msg)`: a Python protobuf message as the plain object
  protobufjs' `fromObject` takes, and back from what its `toObject` gives with
  `JS_OPTIONS` (bytes as base64, enums by name, 64-bit integers as strings).
"""

from __future__ import annotations

import base64
import fcntl
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.descriptor import FieldDescriptor

from tensorwire import v1
from tensorwire.protobuf.descriptors import service_proto
from tests.support.cache import kept_dir

NODE = shutil.which("node")
NPM = shutil.which("npm")
#: proto-loader options of every script here: what `from_js` reads.
JS_OPTIONS = ("{keepCase: true, longs: String, enums: String, bytes: String, "
              "defaults: false, oneofs: false, includeDirs: [includeDir]}")
_LONGS = frozenset({FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64,
                    FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_FIXED64,
                    FieldDescriptor.TYPE_SFIXED64})


def node_modules(request: pytest.FixtureRequest) -> Path:
    """A directory holding node_modules/@grpc/grpc-js and @grpc/proto-loader."""
    if NODE is None or NPM is None:
        pytest.skip("node/npm not installed")
    cache = kept_dir(request, "node-grpc-client")
    # Test modules on other xdist workers share the kept directory: one installs.
    with open(cache / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (cache / "node_modules" / "@grpc" / "proto-loader").exists():
            subprocess.run([NPM, "install", "--no-audit", "--no-fund", "--silent",
                            "@grpc/grpc-js@1", "@grpc/proto-loader@0"], cwd=cache,
                           check=True, capture_output=True, timeout=300)
    return cache


def write_protos(directory: Path, spec: Any) -> Path:
    """Write the service's .proto (and the types it imports) under `directory`."""
    proto = service_proto(spec)
    path = directory / proto.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(proto.proto_text())
    types = directory / v1.PROTO_NAME
    types.parent.mkdir(parents=True, exist_ok=True)
    types.write_text(v1.proto_source())
    return path


def _js_name(fd: FieldDescriptor) -> str:
    """The field's key in protobufjs objects: the .proto name (`keepCase`), except in
    the google.protobuf types protobufjs bundles, whose names are camelCase."""
    if fd.containing_type.full_name.startswith("google.protobuf."):
        return fd.json_name
    return fd.name


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def to_js(msg: Any) -> dict[str, Any]:
    """`msg` as the object protobufjs' `fromObject` builds the same message from."""
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        if _is_map(fd):
            vf = fd.message_type.fields_by_name["value"]
            out[_js_name(fd)] = {str(k): _js_scalar(vf, v) for k, v in value.items()}
        elif fd.is_repeated:
            out[_js_name(fd)] = [_js_scalar(fd, v) for v in value]
        else:
            out[_js_name(fd)] = _js_scalar(fd, value)
    return out


def _js_scalar(fd: FieldDescriptor, value: Any) -> Any:
    if fd.message_type is not None:
        return to_js(value)
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    if fd.enum_type is not None:
        return fd.enum_type.values_by_number[value].name
    if fd.type in _LONGS:
        return str(value)
    return value


def from_js(obj: dict[str, Any], msg: Any) -> Any:
    """Fill `msg` from protobufjs' `toObject` output (`JS_OPTIONS`); returns `msg`.

    Every key must name a field: what protobufjs did not read is simply absent.
    """
    fields = {_js_name(fd): fd for fd in msg.DESCRIPTOR.fields}
    for key, value in obj.items():
        fd = fields[key]
        name = fd.name
        target = getattr(msg, name) if fd.message_type is not None or fd.is_repeated \
            else None
        if _is_map(fd):
            kf = fd.message_type.fields_by_name["key"]
            vf = fd.message_type.fields_by_name["value"]
            for map_key, item in value.items():
                k = _py_scalar(kf, map_key)
                if vf.message_type is not None:
                    from_js(item, target[k])
                else:
                    target[k] = _py_scalar(vf, item)
        elif fd.is_repeated:
            for item in value:
                if fd.message_type is not None:
                    from_js(item, target.add())
                else:
                    target.append(_py_scalar(fd, item))
        elif fd.message_type is not None:
            target.SetInParent()
            from_js(value, target)
        else:
            setattr(msg, name, _py_scalar(fd, value))
    return msg


def _py_scalar(fd: FieldDescriptor, value: Any) -> Any:
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64decode(value)
    if fd.enum_type is not None:
        return fd.enum_type.values_by_name[value].number
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return value in (True, "true")
    if fd.cpp_type in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
                       FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64):
        return int(value)
    if fd.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
        return float(value)
    return value
