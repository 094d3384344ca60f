"""Bearer-token auth on both protocols; CORS; nothing secret ever reaches a body or log."""

from __future__ import annotations

import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, request
from tests.support.ops_service import Ops
from tests.support.servers import serving, spawn_cli

TOKEN = "tw-test-token-5f1c9a"
GOOD = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer not-the-token"}


def http_echo(server, headers=None):
    return post(server.http_url, "echo", {"text": "hi"}, headers=headers)


def grpc_echo(server, metadata=None):
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        try:
            return "OK", caller.call("echo", {"text": "hi"}, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code().name, exc.details()


def grpc_health(server, metadata=None):
    with grpc.insecure_channel(server.grpc_target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10, metadata=metadata)
        except grpc.RpcError as exc:
            return exc.code().name
        return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def test_auth_off_by_default():
    with serving(Ops) as server:
        assert http_echo(server).status == 200
        assert grpc_echo(server) == ("OK", "hi")


def test_http_bearer_auth():
    with serving(Ops, auth_token=TOKEN) as server:
        for headers in (None, WRONG, {"Authorization": TOKEN}):
            reply = http_echo(server, headers)
            assert reply.status == 401
            assert reply.json() == {"error": "missing or invalid bearer token"}
            assert reply.headers["WWW-Authenticate"].startswith("Bearer")
        ok = http_echo(server, GOOD)
        assert (ok.status, ok.body) == (200, b"hi")
        # the contract and docs need the token too; health probes do not
        assert request(f"{server.http_url}/schema.json").status == 401
        assert request(f"{server.http_url}/schema.json", headers=GOOD).status == 200
        assert request(f"{server.http_url}/readyz").status == 200
        assert request(f"{server.http_url}/livez").status == 200
        assert request(f"{server.http_url}/metrics").status == 401
        assert request(f"{server.http_url}/metrics", headers=GOOD).status == 200


def test_grpc_bearer_auth():
    with serving(Ops, auth_token=TOKEN) as server:
        assert grpc_echo(server)[0] == "UNAUTHENTICATED"
        code, details = grpc_echo(server, metadata=[("authorization", "Bearer nope")])
        assert code == "UNAUTHENTICATED" and details == "missing or invalid bearer token"
        assert grpc_echo(server, metadata=[("authorization", f"Bearer {TOKEN}")]) == (
            "OK", "hi")
        # streams are guarded too
        with GrpcCaller(server.spec, server.grpc_target) as caller:
            with pytest.raises(grpc.RpcError) as exc:
                list(caller.stream("tick", {"n": 1, "delay": 0}))
            assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert list(caller.stream("tick", {"n": 2, "delay": 0},
                                      metadata=[("authorization", f"Bearer {TOKEN}")])) == [0, 1]
        # health stays open for probes; reflection (the contract) does not
        assert grpc_health(server) == "SERVING"
        with grpc.insecure_channel(server.grpc_target) as channel:
            stub = reflection_pb2_grpc.ServerReflectionStub(channel)
            replies = stub.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
            with pytest.raises(grpc.RpcError) as exc:
                list(replies)
            assert exc.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_health_and_metrics_open_options():
    with serving(Ops, auth_token=TOKEN, auth_open_health=False,
                 auth_open_metrics=True) as server:
        assert request(f"{server.http_url}/readyz").status == 401
        assert request(f"{server.http_url}/readyz", headers=GOOD).status == 200
        assert request(f"{server.http_url}/metrics").status == 200
        assert grpc_health(server) == "UNAUTHENTICATED"
        assert grpc_health(server, metadata=[("authorization", f"Bearer {TOKEN}")]) == \
            "SERVING"


def test_errors_never_echo_tracebacks_or_the_token(caplog):
    bodies: list[bytes] = []
    with caplog.at_level(logging.DEBUG), serving(Ops, auth_token=TOKEN) as server:
        for headers in (None, WRONG, GOOD):
            for api, values in (("echo", {"text": "x"}), ("fail", {"text": "boom"}),
                                ("echo", {"txt": 1})):
                bodies.append(post(server.http_url, api, values, headers=headers).body)
        failed = post(server.http_url, "fail", {"text": "boom"}, headers=GOOD)
        assert failed.status == 500
        assert failed.json()["error"] == "Internal server error"
        with GrpcCaller(server.spec, server.grpc_target) as caller, \
                pytest.raises(grpc.RpcError) as exc:
            caller.call("fail", {"text": "boom"},
                        metadata=[("authorization", f"Bearer {TOKEN}")])
        assert exc.value.code() == grpc.StatusCode.INTERNAL
        bodies.append(exc.value.details().encode())
    wire = b"\n".join(bodies)
    assert TOKEN.encode() not in wire
    assert b"Traceback" not in wire and b"RuntimeError" not in wire and b"boom" not in wire
    assert "user code failed" in caplog.text  # the server's log keeps the detail
    assert TOKEN not in caplog.text


@pytest.mark.slow
def test_token_stays_out_of_cli_output_with_workers():
    server = spawn_cli("tests.support.ops_service:Ops", "--workers", "2", "--log-level",
                       "debug", env={"TENSORWIRE_AUTH_TOKEN": TOKEN}, drain_output=True)
    try:
        assert http_echo(server).status == 401
        assert http_echo(server, GOOD).status == 200
        assert post(server.http_url, "fail", {}, headers=GOOD).status == 500
    finally:
        server.stop()
    output = server.output()
    assert "refused unauthenticated POST /echo" in output
    assert TOKEN not in output


def test_cors_off_unless_configured():
    with serving(Ops) as server:
        reply = post(server.http_url, "echo", {"text": "x"},
                     headers={"Origin": "https://app.example"})
        assert "Access-Control-Allow-Origin" not in reply.headers
        pre = request(f"{server.http_url}/echo", method="OPTIONS", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
        assert pre.status == 405


def test_cors_preflight_and_headers():
    with serving(Ops, cors_origins=["https://app.example"], auth_token=TOKEN) as server:
        pre = request(f"{server.http_url}/echo", method="OPTIONS", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert pre.status == 204
        assert pre.headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert "POST" in pre.headers["Access-Control-Allow-Methods"]
        assert "Authorization" in pre.headers["Access-Control-Allow-Headers"]
        denied = request(f"{server.http_url}/echo", method="OPTIONS", headers={
            "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
        assert denied.status == 403 and "Access-Control-Allow-Origin" not in denied.headers
        ok = post(server.http_url, "echo", {"text": "x"},
                  headers={**GOOD, "Origin": "https://app.example"})
        assert ok.headers["Access-Control-Allow-Origin"] == "https://app.example"
        assert "Origin" in ok.headers["Vary"]
        # a browser must be able to read the 401 as well
        refused = post(server.http_url, "echo", {"text": "x"},
                       headers={"Origin": "https://app.example"})
        assert refused.status == 401
        assert refused.headers["Access-Control-Allow-Origin"] == "https://app.example"
        # streamed responses get the headers too (set before they are prepared)
        sse = post(server.http_url, "tick", {"n": 1, "delay": 0},
                   headers={**GOOD, "Origin": "https://app.example"})
        assert sse.status == 200
        assert sse.headers["Access-Control-Allow-Origin"] == "https://app.example"
