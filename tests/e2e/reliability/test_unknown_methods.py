"""Without a token, an unknown method is refused like a real one, on both protocols.

Answering UNIMPLEMENTED (or 404) before auth would tell a caller without a token which
methods exist. gRPC calls here are raw bytes on a plain channel: no stub, no descriptor.
"""

from __future__ import annotations

import grpc
import pytest

from tests.support.ops_http import request
from tests.support.ops_service import Ops
from tests.support.servers import serving

TOKEN = "tw-reliability-token-8d1e"
AUTH = [("authorization", f"Bearer {TOKEN}")]


def _call(channel: grpc.Channel, kind: str, method: str, metadata=None) -> grpc.StatusCode:
    """The status of one call of `kind` to `method`, sending one empty message."""
    identity = {"request_serializer": None, "response_deserializer": None}
    try:
        if kind == "unary_unary":
            channel.unary_unary(method, **identity)(b"", timeout=10, metadata=metadata)
        elif kind == "unary_stream":
            list(channel.unary_stream(method, **identity)(b"", timeout=10,
                                                           metadata=metadata))
        elif kind == "stream_unary":
            channel.stream_unary(method, **identity)(iter([b""]), timeout=10,
                                                    metadata=metadata)
        else:
            list(channel.stream_stream(method, **identity)(iter([b""]), timeout=10,
                                                            metadata=metadata))
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


KINDS = ["unary_unary", "unary_stream", "stream_unary", "stream_stream"]


@pytest.fixture(scope="module")
def server():
    with serving(Ops, auth_token=TOKEN) as running:
        yield running


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["/ops.Ops/NoSuchMethod", "/no.such.Service/Call", "/x"])
def test_grpc_unknown_method_without_token_is_unauthenticated(server, kind, method):
    with grpc.insecure_channel(server.grpc_target) as channel:
        assert _call(channel, kind, method) == grpc.StatusCode.UNAUTHENTICATED
        wrong = [("authorization", "Bearer wrong")]
        assert _call(channel, kind, method, wrong) == grpc.StatusCode.UNAUTHENTICATED
        # with the token the truth is told
        assert _call(channel, kind, method, AUTH) == grpc.StatusCode.UNIMPLEMENTED


def test_grpc_real_and_unknown_methods_look_alike_without_token(server):
    service = server.spec.grpc_service_name
    with grpc.insecure_channel(server.grpc_target) as channel:
        real = _call(channel, "unary_unary", f"/{service}/Pid")
        unknown = _call(channel, "unary_unary", f"/{service}/Nope")
        assert real == unknown == grpc.StatusCode.UNAUTHENTICATED
        # and the server keeps serving
        assert _call(channel, "unary_unary", f"/{service}/Pid", AUTH) == grpc.StatusCode.OK


def test_http_unknown_path_without_token_is_401(server):
    assert request(f"{server.http_url}/no_such_api", method="POST", data=b"{}").status == 401
    assert request(f"{server.http_url}/echo", method="POST", data=b"{}").status == 401
    authed = request(f"{server.http_url}/no_such_api", method="POST", data=b"{}",
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert authed.status == 404
