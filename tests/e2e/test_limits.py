"""Each limit trips on both protocols: size, time, concurrency (and multipart on HTTP)."""

from __future__ import annotations

import asyncio
import json
import threading

import grpc
import pytest

import tensorwire
from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, request, sample, scrape, wait_for
from tests.support.ops_service import Ops
from tests.support.raw_sockets import connect, parse_reply, read_until_closed
from tests.support.servers import serving

PROTOCOLS = ["http", "grpc"]


def call(server, protocol: str, api: str, values: dict, **kw):
    """(ok, status, body-or-value): HTTP status code / gRPC code name."""
    if protocol == "http":
        reply = post(server.http_url, api, values, **kw)
        return reply.status == 200, str(reply.status), reply
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        try:
            return True, "OK", caller.call(api, values, **kw)
        except grpc.RpcError as exc:
            return False, exc.code().name, exc


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_request_size_limit(protocol):
    with serving(Ops, max_request_size=1024) as server:
        ok, status, _ = call(server, protocol, "echo", {"text": "x" * 100})
        assert ok, status
        ok, status, reply = call(server, protocol, "echo", {"text": "x" * 5000})
        assert not ok
        assert status == {"http": "413", "grpc": "RESOURCE_EXHAUSTED"}[protocol]
        if protocol == "http":
            assert "exceeds the limit of 1024 bytes" in reply.json()["error"]
        assert call(server, protocol, "echo", {"text": "still serving"})[0]


def _announce(port: int, length: int, path: str = "/echo", auth: str = "") -> bytes:
    """Send a request head with `Expect: 100-continue` and `Content-Length: length`, no
    body, and read what the server answers before any body byte is sent."""
    with connect(port) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     f"\r\nContent-Length: {length}\r\nExpect: 100-continue\r\n{auth}"
                     "\r\n".encode())
        return sock.recv(65536)


@pytest.mark.parametrize("auth", [False, True], ids=["plain", "with-auth"])
def test_an_announced_body_over_the_limit_is_413_before_any_100_continue(auth):
    """curl sends `Expect: 100-continue` before a large upload: over the limit it must
    hear 413 at once (and not upload the body), never a `100 Continue` first."""
    token = "limit-token"
    settings = {"auth_token": token} if auth else {}
    header = f"Authorization: Bearer {token}\r\n" if auth else ""
    with serving(Ops, max_request_size=1024, **settings) as server:
        answer = _announce(server.http_port, 10**9, auth=header)
        assert answer.split(b"\r\n", 1)[0].split(b" ")[1] == b"413", answer
        assert b"100 Continue" not in answer
        head, _, body = answer.partition(b"\r\n\r\n")
        assert b"Content-Type: application/json" in head
        assert json.loads(body)["error"] == ("request body of 1000000000 bytes exceeds "
                                             "the limit of 1024 bytes")
        assert json.loads(body)["request_id"]
        # within the limit the client is told to go on, and is answered
        with connect(server.http_port) as sock:
            body_bytes = b'{"text": "hi"}'
            sock.sendall(f"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                         f"\r\nContent-Length: {len(body_bytes)}\r\nExpect: 100-continue"
                         f"\r\nConnection: close\r\n{header}\r\n".encode())
            assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(body_bytes)
            assert parse_reply(read_until_closed(sock, 10)).status == 200


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("api", ["sleep", "sleep_sync"])
def test_request_timeout(protocol, api):
    with serving(Ops, request_timeout=0.3) as server:
        assert call(server, protocol, api, {"seconds": 0.01})[0]
        ok, status, reply = call(server, protocol, api, {"seconds": 3})
        assert not ok
        assert status == {"http": "504", "grpc": "DEADLINE_EXCEEDED"}[protocol]
        if protocol == "http":
            assert reply.json()["error"] == "the request did not complete within 0.3 s"
        else:
            assert "0.3 s" in reply.details()


def test_stream_timeout_is_per_chunk():
    with serving(Ops, request_timeout=0.5) as server:
        with GrpcCaller(server.spec, server.grpc_target) as caller:
            # 6 chunks, 0.2 s apart: 1.2 s in all, but no gap reaches the 0.5 s limit
            assert list(caller.stream("tick", {"n": 6, "delay": 0.2})) == list(range(6))
            with pytest.raises(grpc.RpcError) as exc:
                list(caller.stream("tick", {"n": 2, "delay": 2}))
        assert exc.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        reply = post(server.http_url, "tick", {"n": 2, "delay": 2})
        assert reply.status == 504  # before the first chunk: a proper status


def test_client_deadline_shorter_than_server_limit():
    with serving(Ops, request_timeout=30) as server:
        with GrpcCaller(server.spec, server.grpc_target) as caller, \
                pytest.raises(grpc.RpcError) as exc:
            caller.call("sleep", {"seconds": 5}, timeout=0.3)
        assert exc.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


@tensorwire.service
class Gated:
    """One API that holds its request until the test lets it go: the slot is certainly
    taken while the test knocks, however slow the machine."""

    release = threading.Event()

    @tensorwire.api
    async def hold(self) -> str:
        while not Gated.release.is_set():
            await asyncio.sleep(0.01)
        return "released"

    @tensorwire.api
    def echo(self, text: str) -> str:
        return text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_concurrency_limit(protocol):
    Gated.release.clear()
    with serving(Gated, max_concurrency=1, retry_after=3) as server:
        results: list = []
        slow = threading.Thread(target=lambda: results.append(
            call(server, protocol, "hold", {})))
        slow.start()
        wait_for(lambda: sample(scrape(server.http_url), "tensorwire_requests_in_flight",
                                api="hold", protocol=protocol, missing=0.0) == 1,
                 what="the held call running")
        ok, status, reply = call(server, protocol, "echo", {"text": "one too many"})
        assert not ok
        if protocol == "http":
            assert status == "503"
            assert reply.headers["Retry-After"] == "3"
            assert "more than 1 requests in flight" in reply.json()["error"]
        else:
            assert status == "RESOURCE_EXHAUSTED"
        Gated.release.set()
        slow.join(30)
        assert results and results[0][0], results
        assert call(server, protocol, "echo", {"text": "room again"})[0]


def multipart(parts: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = "tensorwireboundary"
    body = b"".join(
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"
        f"Content-Type: application/json\r\n\r\n".encode() + data + b"\r\n"
        for name, data in parts) + f"--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def test_multipart_limits():
    with serving(Ops, max_parts=3, max_part_size=64) as server:
        url = f"{server.http_url}/concat"

        def send(parts):
            body, ctype = multipart(parts)
            return request(url, method="POST", data=body, headers={"Content-Type": ctype})

        ok = send([("a", b'"x"'), ("b", b'"y"'), ("c", b'"z"')])
        assert (ok.status, ok.body) == (200, b"xyz")
        too_many = send([("a", b'"x"'), ("b", b'"y"'), ("c", b'"z"'), ("d", b'"w"')])
        assert too_many.status == 413 and "more than 3 parts" in too_many.json()["error"]
        too_big = send([("a", b'"' + b"x" * 100 + b'"'), ("b", b'"y"'), ("c", b'"z"')])
        assert too_big.status == 413
        assert "part 'a' is too large" in too_big.json()["error"]


def test_grpc_response_size_limit():
    """HTTP streams any response size; a gRPC message over max_response_size is refused
    (grpc's own send limit) and the server keeps serving."""
    with serving(Ops, max_response_size=2048) as server:
        ok, status, _ = call(server, "grpc", "echo", {"text": "x" * 100})
        assert ok, status
        ok, status, _ = call(server, "grpc", "echo", {"text": "x" * 5000})
        assert not ok and status == "RESOURCE_EXHAUSTED"
        assert call(server, "grpc", "echo", {"text": "still serving"})[0]
        assert call(server, "http", "echo", {"text": "x" * 5000})[0]
