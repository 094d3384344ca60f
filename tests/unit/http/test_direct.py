"""Compiled APIs past the router (`tensorwire.http.direct`): taken only where nothing
wraps the routes, and answering byte for byte as the routed handler does."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from aiohttp import web

import tensorwire
from tensorwire.http.app import create_app
from tensorwire.http.direct import DirectRoutes
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.security.http import secure_app
from tensorwire.settings import Settings
from tests.support.servers import RunningServer, serving


@tensorwire.service
class Direct:
    @tensorwire.api
    async def add(self, a: int, b: int = 1) -> int:
        return a + b

    @tensorwire.api
    def text(self, n: int) -> str:
        return "x" * n

    @tensorwire.api
    def numbers(self, n: int) -> dict[str, int]:
        return {str(i): i for i in range(n)}

    @tensorwire.api
    async def slow(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    @tensorwire.api
    def broken(self, a: int) -> int:
        raise RuntimeError("a bug")

    @tensorwire.api
    async def count(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @tensorwire.api
    def with_context(self, ctx: tensorwire.Context, a: int) -> int:
        ctx.response.headers["X-Seen"] = "yes"
        return a


class Resolves:
    """Counts the router's resolutions (a direct request makes none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = web.UrlDispatcher.resolve

        async def resolve(router: web.UrlDispatcher, request: web.Request) -> Any:
            self.count += 1
            return await original(router, request)

        monkeypatch.setattr(web.UrlDispatcher, "resolve", resolve)


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with serving(Direct, grpc=False, request_timeout=0.3) as running:
        yield running


def _exchange(port: int, raw: bytes) -> bytes:
    """Send `raw` and read until the server closes (the last request closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def _request(target: str, body: bytes, *, version: str = "1.1", close: bool = True,
             extra: str = "") -> bytes:
    connection = "Connection: close\r\n" if close else ""
    return (f"POST {target} HTTP/{version}\r\nHost: test\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{connection}{extra}\r\n").encode() + body


def _stable(answer: bytes) -> bytes:
    """The answer without what differs between two of the same: the date, request ids."""
    answer = re.sub(rb"Date: [^\r]*\r\n", b"Date: -\r\n", answer)
    answer = re.sub(rb"(?i)(x-request-id: )[^\r]*", rb"\1-", answer)
    return re.sub(rb'"request_id":"[^"]*"', b'"request_id":"-"', answer)


CASES = [
    ("add", {"a": 2, "b": 3}),
    ("add", {"a": "two"}),         # 400 with the field named
    ("add", {"a": 1, "c": 2}),     # an unknown field
    ("text", {"n": 3}),
    ("text", {"n": 200_000}),      # text/plain: the general handler
    ("numbers", {"n": 3}),
    ("numbers", {"n": 40_000}),    # a JSON answer past the one-write size
    ("slow", {"seconds": 2.0}),    # 504
    ("broken", {"a": 1}),          # 500
    ("count", {"n": 3}),           # server-sent events
    ("with_context", {"a": 4}),    # the general handler: routed either way
]


@pytest.mark.parametrize(("api", "payload"), CASES)
def test_direct_answers_as_the_routed_handler(server: RunningServer, api: str,
                                              payload: dict[str, Any]) -> None:
    body = orjson.dumps(payload)
    direct = _exchange(server.http_port, _request(f"/{api}", body))
    routed = _exchange(server.http_port, _request(f"/{api}?via=router", body))
    assert _stable(direct) == _stable(routed)
    assert direct.startswith(b"HTTP/1.1 ")


@pytest.mark.parametrize(("version", "close"), [("1.1", False), ("1.1", True),
                                                ("1.0", False), ("1.0", True)])
def test_keep_alive_and_versions_as_aiohttp_writes_them(
        server: RunningServer, version: str, close: bool) -> None:
    body = b'{"a": 1}'
    extra = "Connection: keep-alive\r\n" if version == "1.0" and not close else ""
    direct_req = _request("/add", body, version=version, close=close, extra=extra)
    routed_req = _request("/add?via=router", body, version=version, close=close,
                          extra=extra)
    # a kept-alive connection answers the next request too; the last one closes it
    last = _request("/add", b'{"a": 9}')
    direct = _exchange(server.http_port, direct_req + (last if not close else b""))
    routed = _exchange(server.http_port, routed_req + (last if not close else b""))
    assert _stable(direct) == _stable(routed)
    if not close:
        assert direct.count(b"HTTP/") == 2 and direct.endswith(b"\r\n\r\n10")
    else:
        assert direct.count(b"HTTP/") == 1


def test_pipelined_requests_each_get_their_answer(server: RunningServer) -> None:
    requests = b"".join(_request("/add", orjson.dumps({"a": i}), close=False)
                        for i in range(5)) + _request("/add", b'{"a": 5}')
    answer = _exchange(server.http_port, requests)
    bodies = re.findall(rb"\r\n\r\n(\d+)", answer)
    assert bodies == [str(i + 1).encode() for i in range(6)]


def test_expect_100_continue_is_answered(server: RunningServer) -> None:
    answer = _exchange(server.http_port,
                       _request("/add", b'{"a": 1}', extra="Expect: 100-continue\r\n"))
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert answer.endswith(b"\r\n\r\n2")


def test_other_methods_and_paths_keep_the_routers_answers(server: RunningServer) -> None:
    get = _exchange(server.http_port, b"GET /add HTTP/1.1\r\nHost: t\r\nConnection: close"
                                      b"\r\n\r\n")
    assert get.startswith(b"HTTP/1.1 405 ")
    assert b'"error"' in get
    missing = _exchange(server.http_port, _request("/nowhere", b"{}"))
    assert missing.startswith(b"HTTP/1.1 404 ")


def test_direct_requests_skip_the_router(server: RunningServer,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    resolves = Resolves(monkeypatch)
    for _ in range(3):
        _exchange(server.http_port, _request("/add", b'{"a": 1}'))
        _exchange(server.http_port, _request("/count", b'{"n": 2}'))
    assert resolves.count == 0
    _exchange(server.http_port, _request("/with_context", b'{"a": 1}'))  # a Context too
    assert resolves.count == 0
    _exchange(server.http_port, _request("/add?via=router", b'{"a": 1}'))
    assert resolves.count == 1


def test_a_client_that_leaves_does_not_stop_the_server(server: RunningServer) -> None:
    with socket.create_connection(("127.0.0.1", server.http_port)) as sock:
        sock.sendall(_request("/slow", b'{"seconds": 0.1}'))
    answer = _exchange(server.http_port, _request("/add", b'{"a": 1}'))
    assert answer.startswith(b"HTTP/1.1 200 OK")


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = ServiceRuntime(tensorwire.get_service_spec(Direct), Settings())
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


async def _fallback(request: web.BaseRequest) -> web.StreamResponse:
    raise AssertionError("not called")


async def test_every_api_route_is_direct(runtime: ServiceRuntime) -> None:
    """One rule: every API's own route skips the router when nothing wraps the app,
    whatever its inputs and outputs (one envelope serves them all)."""
    app = create_app(runtime, runtime.settings)
    routes = DirectRoutes.of(app, _fallback)
    assert routes is not None
    assert sorted(routes.routes) == ["/add", "/broken", "/count", "/numbers", "/slow",
                                     "/text", "/with_context"]


@pytest.mark.parametrize("options", [{"auth_token": "secret"},
                                     {"cors_origins": ["https://a.example"]}])
async def test_no_direct_routes_when_something_wraps_them(
        runtime: ServiceRuntime, options: dict[str, Any]) -> None:
    settings = Settings(**options)
    app = create_app(runtime, settings)
    secure_app(app, settings)
    assert DirectRoutes.of(app, _fallback) is None


def test_auth_still_guards_every_api(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(Direct, grpc=False, auth_token="secret") as running:
        resolves = Resolves(monkeypatch)
        refused = _exchange(running.http_port, _request("/add", b'{"a": 1}'))
        assert refused.startswith(b"HTTP/1.1 401 ")
        allowed = _exchange(running.http_port, _request(
            "/add", b'{"a": 1}', extra="Authorization: Bearer secret\r\n"))
        assert allowed.startswith(b"HTTP/1.1 200 OK") and allowed.endswith(b"\r\n\r\n2")
        assert resolves.count == 2
