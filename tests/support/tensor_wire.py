"""Sending the same tensor/frame inputs over HTTP JSON, HTTP .npy and gRPC, for e2e tables.

Encoding here is deliberately *not* tensorwire's own: JSON bodies are built with orjson
from `tolist()`, .npy files with `np.save` (pickles included, to be refused), multipart
bodies by hand, and protobuf tensors field by field, so the server's checks are what
is tested, not a client that would refuse to send bad input.
"""

from __future__ import annotations

import io
import math
import typing as t
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field

import grpc
import numpy as np
import orjson

from tensorwire import v1
from tensorwire.codecs.containers import OptionalCodec
from tensorwire.codecs.dataframe import DataFrameCodec
from tensorwire.codecs.models import ModelCodec
from tensorwire.codecs.tensor import TensorCodec
from tensorwire.protobuf.descriptors import service_proto

from .grpc_calls import GrpcCaller, error_locs

WIRES = ("json", "npy", "grpc")


@dataclass(frozen=True)
class Lie:
    """A tensor whose binary forms claim `shape` while carrying `array`'s bytes."""

    array: np.ndarray
    shape: tuple[int, ...]


@dataclass
class Outcome:
    ok: bool
    value: t.Any = None
    status: int | str | None = None
    locs: list[list[t.Any]] = field(default_factory=list)
    msgs: list[str] = field(default_factory=list)
    media_type: str | None = None


def jsonable(value: t.Any, codec: t.Any = None) -> t.Any:
    import pandas as pd

    if isinstance(value, Lie):
        raise TypeError("a Lie has no JSON form")
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "c":
            value = np.stack([value.real, value.imag], axis=-1)
        return _nonfinite(value.tolist())
    if isinstance(value, pd.DataFrame):
        orient = codec.schema.orient if isinstance(codec, DataFrameCodec) else "records"
        return value.to_dict(orient="records" if orient == "records" else "list")
    if isinstance(value, dict):
        fields = {f.name: f.codec for f in codec.fields} if isinstance(codec, ModelCodec) else {}
        return {k: jsonable(v, fields.get(k)) for k, v in value.items()}
    return value


def _nonfinite(value: t.Any) -> t.Any:
    if isinstance(value, list):
        return [_nonfinite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def npy_bytes(value: t.Any) -> bytes:
    if isinstance(value, Lie):
        buf = io.BytesIO()
        np.save(buf, value.array)
        real = np.lib.format.header_data_from_array_1_0(value.array)["shape"]
        data = buf.getvalue()
        return data.replace(repr(real).encode(), repr(tuple(value.shape)).encode(), 1)
    buf = io.BytesIO()
    np.save(buf, value, allow_pickle=True)
    return buf.getvalue()


def _unwrap(codec: t.Any) -> t.Any:
    return codec.inner if isinstance(codec, OptionalCodec) else codec


def fill_raw(codec: t.Any, msg: t.Any, name: str, value: t.Any) -> None:
    """Set one request field without client-side validation."""
    codec = _unwrap(codec)
    if isinstance(value, Lie):
        fill_raw(codec, msg, name, value.array)
        target = getattr(msg, name)
        del target.shape[:]
        target.shape.extend(value.shape)
    elif isinstance(value, np.ndarray) and isinstance(codec, TensorCodec):
        target = getattr(msg, name)
        if value.dtype.hasobject:  # no DType number exists for it: the closest lie
            target.dtype = 99
            target.shape.extend(value.shape)
            return
        from tensorwire.wire import tensors as prototensor

        prototensor.fill(value, target)
    elif isinstance(value, dict) and isinstance(codec, ModelCodec):
        sub = getattr(msg, name)
        sub.SetInParent()
        fields = {f.name: f.codec for f in codec.fields}
        for key, item in value.items():
            fill_raw(fields[key], sub, key, item)
    elif isinstance(value, dict) and isinstance(codec, DataFrameCodec):
        frame = getattr(msg, name)  # columns as given: ragged or missing ones included
        frame.SetInParent()
        from tensorwire.wire import tensors as prototensor

        for column, values in value.items():
            frame.columns.append(column)
            prototensor.fill(np.array(values), frame.data.add())
    elif isinstance(value, list) and isinstance(codec, TensorCodec):
        fill_raw(codec, msg, name, np.array(value))
    else:
        codec.proto.write_field(msg, name, value)


class Sender:
    """Calls the APIs of one running server over each wire form."""

    def __init__(self, server: t.Any) -> None:
        self.server = server
        self.spec = server.spec
        self.grpc = GrpcCaller(self.spec, server.grpc_target)
        self.proto = service_proto(self.spec)

    def close(self) -> None:
        self.grpc.close()

    def call(self, wire: str, api_name: str, inputs: dict[str, t.Any]) -> Outcome:
        api = self.spec.apis[api_name]
        if wire == "grpc":
            return self._grpc(api, inputs)
        if wire == "json":
            if api.is_root:
                (value,) = inputs.values()
                body = orjson.dumps(jsonable(value, api.root_field.codec))
            else:
                body = orjson.dumps({k: jsonable(v, api.field_by_name[k].codec)
                                     for k, v in inputs.items()})
            return self._http(api, body, "application/json", "application/json")
        if api.is_root:
            (value,) = inputs.values()
            return self._http(api, npy_bytes(value), "application/x-npy", "application/x-npy")
        parts = []
        for name, value in inputs.items():
            codec = _unwrap(api.field_by_name[name].codec)
            if isinstance(codec, TensorCodec) and isinstance(value, np.ndarray | Lie):
                parts.append((name, f"{name}.npy", "application/x-npy", npy_bytes(value)))
            else:
                parts.append((name, None, "application/json",
                              orjson.dumps(jsonable(value, codec))))
        body, ctype = multipart(parts)
        return self._http(api, body, ctype, "application/x-npy")

    def _http(self, api: t.Any, body: bytes, ctype: str, accept: str) -> Outcome:
        req = urllib.request.Request(self.server.http_url + api.route, data=body,
                                     headers={"Content-Type": ctype, "Accept": accept})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                media = resp.headers.get("Content-Type", "")
                data = resp.read()
                value = (np.load(io.BytesIO(data), allow_pickle=False)
                         if media.startswith("application/x-npy") else orjson.loads(data))
                return Outcome(True, value, resp.status, media_type=media)
        except urllib.error.HTTPError as exc:
            payload = orjson.loads(exc.read())
            detail = payload.get("detail", [])
            return Outcome(False, payload, exc.code, [d["loc"] for d in detail],
                           [d["msg"] for d in detail] or [payload["error"]])

    def _grpc(self, api: t.Any, inputs: dict[str, t.Any]) -> Outcome:
        messages = self.proto.messages[api.name]
        msg = messages.request_cls()
        for name, value in inputs.items():
            fill_raw(api.field_by_name[name].codec, msg, name, value)
        try:
            value = self.grpc.call(api.name, raw=msg)
        except grpc.RpcError as exc:
            return Outcome(False, exc.details(), exc.code().name, error_locs(exc),
                           [exc.details()])
        return Outcome(True, value, "OK")


def multipart(parts: list[tuple[str, str | None, str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = bytearray()
    for name, filename, ctype, data in parts:
        disposition = f'form-data; name="{name}"'
        if filename:
            disposition += f'; filename="{filename}"'
        out += (f"--{boundary}\r\nContent-Disposition: {disposition}\r\n"
                f"Content-Type: {ctype}\r\n\r\n").encode()
        out += data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


def as_plain(value: t.Any) -> t.Any:
    """Outputs of any wire as plain Python for comparison (arrays -> lists, frames -> dicts)."""
    import pandas as pd

    if isinstance(value, np.ndarray | np.generic):
        return _nonfinite(np.asarray(value).tolist())
    if isinstance(value, pd.DataFrame):
        return {str(k): as_plain(v) for k, v in value.to_dict(orient="list").items()}
    if hasattr(value, "numpy") and hasattr(value, "dtype"):  # torch / tf tensors
        from tensorwire.codecs.frameworks import framework_of

        return as_plain(framework_of(value).to_numpy(value))
    if hasattr(value, "model_dump"):
        return {k: as_plain(getattr(value, k)) for k in type(value).model_fields}
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_plain(v) for v in value]
    return value


__all__ = ["WIRES", "Lie", "Outcome", "Sender", "as_plain", "multipart", "v1"]
