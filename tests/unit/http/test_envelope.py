"""The compiled HTTP handler: chosen for plain JSON APIs, and answering exactly as the
general handler does (status, body, errors, time limits, metrics, access lines)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from pydantic import BaseModel

import tensorwire
from tensorwire.http.endpoint import HttpEndpoint
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.telemetry.metrics import flush, render


class Point(BaseModel):
    x: float
    y: float


@tensorwire.service
class Compiled:
    @tensorwire.api
    async def add(self, a: int, b: int = 1) -> int:
        return a + b

    @tensorwire.api
    def norm(self, p: Point) -> dict[str, float]:
        return {"norm": (p.x ** 2 + p.y ** 2) ** 0.5}

    @tensorwire.api
    async def slow(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    @tensorwire.api
    def slow_def(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @tensorwire.api
    def broken(self, a: int) -> int:
        raise RuntimeError("a bug, not the client's fault")

    @tensorwire.api
    async def broken_later(self, a: int) -> int:
        await asyncio.sleep(0)  # fails after its first step (runtime.eager)
        raise RuntimeError("a bug, after a suspension")

    @tensorwire.api
    def with_context(self, ctx: tensorwire.Context, a: int) -> int:
        ctx.response.headers["X-Seen"] = ctx.request.api
        return a

    @tensorwire.api
    async def stream(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @tensorwire.api
    async def stream_fails(self, after: int) -> AsyncIterator[str]:
        for i in range(after):
            yield f"line {i}"
        raise RuntimeError("a bug, mid-stream or before the first chunk")

    @tensorwire.api
    def stream_def(self, n: int) -> Iterator[int]:
        yield from range(n)

    @tensorwire.api
    async def stream_stalls(self, after: int) -> AsyncIterator[int]:
        for i in range(after):
            yield i
        await asyncio.sleep(5)  # past request_timeout (0.3 s): the chunk never comes
        yield after

    @tensorwire.api
    async def stream_context(self, ctx: tensorwire.Context, n: int) -> AsyncIterator[int]:
        ctx.response.headers["X-Seen"] = ctx.request.api
        for i in range(n):
            yield i


async def _runtime(**options: Any) -> ServiceRuntime:
    settings = Settings(**{"request_timeout": 0.3, "access_log": True, **options})
    runtime = ServiceRuntime(tensorwire.get_service_spec(Compiled), settings)
    await runtime.start()
    return runtime


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = await _runtime()
    try:
        yield runtime
    finally:
        await runtime.close()


def _endpoint(runtime: ServiceRuntime, name: str) -> HttpEndpoint:
    return HttpEndpoint(runtime.spec.apis[name], runtime, runtime.settings)


@pytest.fixture
async def client(runtime: ServiceRuntime) -> AsyncIterator[TestClient]:
    """Each API twice: `/compiled/<api>` on the route's handler, `/general/<api>` on the
    general one, so that a test can send the same request to both."""
    app = web.Application()
    for name in runtime.spec.apis:
        endpoint = _endpoint(runtime, name)
        app.router.add_post(f"/compiled/{name}", endpoint.handler)
        app.router.add_post(f"/general/{name}", endpoint.handle)
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_plain_json_apis_get_a_compiled_handler(runtime: ServiceRuntime) -> None:
    for name in ("add", "norm", "slow", "slow_def", "broken", "stream", "stream_def"):
        endpoint = _endpoint(runtime, name)
        assert endpoint.handler != endpoint.handle, name


async def test_apis_that_need_more_keep_the_general_handler(
        runtime: ServiceRuntime) -> None:
    for name in ("with_context", "stream_context"):
        endpoint = _endpoint(runtime, name)
        assert endpoint.handler == endpoint.handle, name


async def test_tracing_keeps_the_general_handler() -> None:
    runtime = await _runtime()
    try:
        runtime.tracing = object()  # any tracer: the compiled handler never makes spans
        endpoint = _endpoint(runtime, "add")
        assert endpoint.handler == endpoint.handle
    finally:
        runtime.tracing = None
        await runtime.close()


CASES = [
    ("add", {"a": 2, "b": 3}, 200),
    ("add", {"a": 2}, 200),
    ("add", {"a": "two"}, 400),            # names the field
    ("add", {}, 400),                      # a missing field
    ("add", {"a": 1, "c": 2}, 400),        # an unknown field
    ("norm", {"p": {"x": 3, "y": 4}}, 200),
    ("norm", {"p": {"x": 3}}, 400),        # a nested field
    ("slow", {"seconds": 0.0}, 200),
    ("slow", {"seconds": 2.0}, 504),       # past request_timeout
    ("slow_def", {"seconds": 2.0}, 504),   # a def too
    ("broken", {"a": 1}, 500),             # without the traceback
    ("broken_later", {"a": 1}, 500),       # failing after a suspension
    ("stream", {"n": 3}, 200),             # server-sent events
    ("stream", {"n": 0}, 200),             # no event at all
    ("stream", {"n": "x"}, 400),
    ("stream_def", {"n": 3}, 200),         # a def generator, stepped in the pool
    ("stream_fails", {"after": 0}, 500),   # before the first chunk: a status
    ("stream_fails", {"after": 2}, 200),   # after it: an error event
    ("stream_stalls", {"after": 0}, 504),  # the first chunk past the time limit
    ("stream_stalls", {"after": 2}, 200),  # a later one: a 504 error event
]


_JSON = {"Content-Type": "application/json"}


async def _post(client: TestClient, path: str, body: Any, **headers: str) -> Any:
    return await client.post(path, data=body, headers={**_JSON, **headers})


def _without_id(body: bytes) -> Any:
    value = orjson.loads(body)
    if isinstance(value, dict):
        value.pop("request_id", None)
    return value


@pytest.mark.parametrize(("api", "payload", "status"), CASES)
async def test_the_compiled_handler_answers_as_the_general_one(
        client: TestClient, api: str, payload: dict[str, Any], status: int) -> None:
    body = orjson.dumps(payload)
    answers = []
    for path in (f"/compiled/{api}", f"/general/{api}"):
        resp = await _post(client, path, body)
        data = await resp.read()
        answers.append((resp.status, resp.headers["Content-Type"],
                        data if resp.content_type == "text/event-stream"
                        else _without_id(data)))
    assert answers[0] == answers[1]
    assert answers[0][0] == status, answers[0]


async def test_a_compiled_stream_frames_for_its_client_as_the_general_one(
        client: TestClient) -> None:
    """BentoML's client reads raw chunks, every other client events (streams.py)."""
    for agent, media in (("BentoML HTTP Client/1.4", "application/json"),
                         ("curl/8", "text/event-stream")):
        answers = []
        for path in ("/compiled/stream", "/general/stream"):
            resp = await _post(client, path, b'{"n": 2}', **{"User-Agent": agent})
            answers.append((resp.status, resp.content_type, await resp.read()))
        assert answers[0] == answers[1]
        assert answers[0][:2] == (200, media), answers[0]


async def test_a_compiled_stream_is_counted_and_logged(
        client: TestClient, runtime: ServiceRuntime,
        caplog: pytest.LogCaptureFixture) -> None:
    flush()
    ok = _count("stream", "200")
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        resp = await _post(client, "/compiled/stream", b'{"n": 2}',
                           **{"X-Request-ID": "stream-1"})
        assert resp.status == 200 and (await resp.read()).count(b"data: ") == 2
    runtime.admission.flush()
    assert _count("stream", "200") == ok + 1
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorwire.access"]
    assert len(lines) == 1 and "stream-1" in lines[0] and "200" in lines[0], lines


async def test_only_a_method_that_suspends_goes_under_the_time_limit(
        runtime: ServiceRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    """An `async def` that returns in its first step cannot be cut short by a limit
    (there is no await to cancel at): it costs no registration. One that waits does."""
    limited: list[float] = []
    run = runtime.deadlines.run

    def counting(limit: float, work: Any) -> Any:
        limited.append(limit)
        return run(limit, work)

    monkeypatch.setattr(runtime.deadlines, "run", counting)
    app = web.Application()
    for name in ("add", "slow"):
        app.router.add_post(f"/{name}", _endpoint(runtime, name).handler)
    async with TestClient(TestServer(app)) as patched:
        assert (await _post(patched, "/add", b'{"a": 1}')).status == 200
        assert limited == []
        assert (await _post(patched, "/slow", b'{"seconds": 0.01}')).status == 200
        assert limited == [0.3]
        assert (await _post(patched, "/slow", b'{"seconds": 2}')).status == 504
    assert runtime.deadlines.pending == 0


async def test_bad_json_is_a_400_on_the_compiled_path(client: TestClient) -> None:
    resp = await _post(client, "/compiled/add", b"{not json")
    assert resp.status == 400
    assert "error" in await resp.json()


async def test_an_error_carries_the_request_id_the_client_sent(client: TestClient) -> None:
    resp = await _post(client, "/compiled/add", b"{}", **{"X-Request-ID": "req-compiled-1"})
    assert resp.status == 400
    assert resp.headers.get("X-Request-ID") == "req-compiled-1" or \
        (await resp.json()).get("request_id") == "req-compiled-1"


def _count(api: str, status: str) -> float:
    text = render()[0].decode()
    total = 0.0
    for line in text.splitlines():
        if (line.startswith("tensorwire_requests_total{") and f'api="{api}"' in line
                and 'protocol="http"' in line and f'status="{status}"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_count_compiled_requests(client: TestClient,
                                               runtime: ServiceRuntime) -> None:
    flush()  # counts other runtimes of this process still hold go in before the baseline
    ok, bad = _count("add", "200"), _count("add", "400")
    for _ in range(3):
        assert (await _post(client, "/compiled/add", b'{"a": 1}')).status == 200
    assert (await _post(client, "/compiled/add", b'{"a": "x"}')).status == 400
    runtime.admission.flush()
    assert _count("add", "200") == ok + 3
    assert _count("add", "400") == bad + 1


async def test_access_lines_are_written_for_compiled_requests(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        assert (await _post(client, "/compiled/add", b'{"a": 1}',
                                     **{"X-Request-ID": "access-1"})).status == 200
        assert (await _post(client, "/compiled/add", b'{"a": "x"}')).status == 400
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorwire.access"]
    assert len(lines) == 2, lines
    assert "access-1" in lines[0] and "200" in lines[0]
    assert "400" in lines[1]


async def test_draining_falls_back_to_the_general_refusal(
        client: TestClient, runtime: ServiceRuntime) -> None:
    runtime.admission.draining = True
    try:
        compiled = await _post(client, "/compiled/add", b'{"a": 1}')
        general = await _post(client, "/general/add", b'{"a": 1}')
    finally:
        runtime.admission.draining = False
    assert compiled.status == general.status == 503
    assert _without_id(await compiled.read()) == _without_id(await general.read())


async def test_a_chunked_body_takes_the_general_path(client: TestClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"a": '
        yield b"41}"

    resp = await _post(client, "/compiled/add", chunks())
    assert resp.status == 200
    assert await resp.json() == 42


async def test_a_stream_chunk_past_the_time_limit_ends_in_a_504_event(
        client: TestClient) -> None:
    resp = await _post(client, "/compiled/stream_stalls", b'{"after": 2}')
    events = (await resp.read()).decode().split("\n\n")
    assert resp.status == 200
    assert events[:2] == ["data: 0", "data: 1"]
    assert events[2].startswith("event: error\ndata: ")
    assert orjson.loads(events[2].split("data: ", 1)[1])["status"] == 504
