"""Every singular message field occurs once on the wire, in what the server and the
clients write.

protobufjs (Node, browsers, grpc-web) does not merge two occurrences of a singular
message field: it keeps the last. A Tensor written as a header occurrence and a data
occurrence arrives there as data without dtype and shape. The strict walker of
tests/support/wire_fields.py reads the bytes and names any field that repeats.
"""

from __future__ import annotations

import typing as t
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tensorwire
from tensorwire.client.filedata import ClientFiles
from tensorwire.client.grpc_transport import encode_request, grpc_api
from tensorwire.protobuf import bytes_fields
from tensorwire.protobuf.descriptors import service_proto
from tensorwire.validators import DType
from tests.support.wire_fields import repeated_singular_fields


class Inner(tensorwire.IODescriptor):
    vector: t.Annotated[np.ndarray, DType("float16")]
    label: str = ""


class Holder(tensorwire.IODescriptor):
    tensor: np.ndarray
    maybe: np.ndarray | None = None
    inner: Inner
    frame: pd.DataFrame | None = None
    note: str = ""


@tensorwire.service
class Wire:
    @tensorwire.api
    def tensor(self, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    @tensorwire.api
    def frame(self, df: pd.DataFrame) -> pd.DataFrame:
        raise NotImplementedError

    @tensorwire.api
    def file(self, f: Path) -> Path:
        raise NotImplementedError

    @tensorwire.api
    def holder(self, h: Holder) -> Holder:
        raise NotImplementedError

    @tensorwire.api
    def stream(self, x: np.ndarray) -> t.Generator[np.ndarray, None, None]:
        yield x


PROTO = service_proto(tensorwire.get_service_spec(Wire))
SERVICE = PROTO.pool.FindServiceByName(tensorwire.get_service_spec(Wire).grpc_service_name)
CLIENT_APIS = {api.name: api for api in (grpc_api(SERVICE, m) for m in SERVICE.methods)}

X = np.arange(12, dtype=np.float32).reshape(3, 4)
FRAME = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5], "c": ["x", "y", "z"]},
                     index=[10, 20, 30])
HOLDER = Holder(tensor=X, maybe=X[:1].astype(np.int64),
                inner=Inner(vector=np.ones(4, np.float16), label="in"), frame=FRAME,
                note="n")


APIS = ["tensor", "frame", "file", "holder", "stream"]


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"hello\n" * 100)
    return path


def _inputs(tmp_path: Path) -> dict[str, dict[str, t.Any]]:
    return {"tensor": {"x": X, "y": X[::-1].copy()}, "frame": {"df": FRAME},
            "file": {"f": _file(tmp_path)}, "holder": {"h": HOLDER}, "stream": {"x": X}}


def _outputs(tmp_path: Path) -> dict[str, t.Any]:
    return {"tensor": X, "frame": FRAME, "file": _file(tmp_path), "holder": HOLDER,
            "stream": X}


def _assert_once(message_cls: type, wire: bytes) -> None:
    assert repeated_singular_fields(message_cls.DESCRIPTOR, wire) == []
    assert len(wire) > X.nbytes  # the walker saw the payload, not an empty message


@pytest.mark.parametrize("api", APIS)
def test_server_replies_write_each_singular_field_once(api: str, tmp_path: Path) -> None:
    m = PROTO.messages[api]
    wire = m.response_bytes(_outputs(tmp_path)[api])
    _assert_once(m.response_cls, wire)
    assert m.response_cls.FromString(wire) == m.response(_outputs(tmp_path)[api])


@pytest.mark.parametrize("api", APIS)
def test_client_requests_write_each_singular_field_once(api: str, tmp_path: Path) -> None:
    values = _inputs(tmp_path)[api]
    m = PROTO.messages[api]
    # tensorwire.protobuf.messages own request path (the zero-copy one the benchmarks use) ...
    _assert_once(m.request_cls, m.request_bytes(values))
    # ... and the client's (tensorwire.client, descriptors from reflection).
    if api == "holder":  # the client takes dicts for models
        values = {"h": {"tensor": HOLDER.tensor, "maybe": HOLDER.maybe, "note": "n",
                        "inner": {"vector": HOLDER.inner.vector, "label": "in"},
                        "frame": FRAME}}
    files = ClientFiles()
    try:
        msg = encode_request(CLIENT_APIS[api], values, files)
    finally:
        files.close()
    _assert_once(m.request_cls, msg.SerializeToString())


def test_the_walker_names_a_field_written_twice() -> None:
    """The two-occurrence form (header, then data) that protobufjs reads as data only."""
    m = PROTO.messages["tensor"]
    header = m.response(X)
    header.result.ClearField("data")
    field = next(iter(m._response_split.values()))
    twice = header.SerializeToString() + b"".join(bytes_fields.fragment(field, X.tobytes()))
    assert m.response_cls.FromString(twice) == m.response(X)  # merging parsers agree ...
    assert repeated_singular_fields(m.response_cls.DESCRIPTOR, twice) == [
        "wire.TensorResponse.result"]  # ... but it is not once

