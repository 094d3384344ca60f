"""The one HTTP envelope (`tensorwire.http.request_envelope`): every API's route, with or without
a Context, unary or streamed, answered through it (status, body, errors, time limits,
metrics, access lines, refusals)."""

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
from tensorwire.http.native import NativeSteps
from tensorwire.http.request_envelope import HttpEnvelope
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.telemetry.metrics import flush, render


class Point(BaseModel):
    x: float
    y: float


@tensorwire.service
class Enveloped:
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
    runtime = ServiceRuntime(tensorwire.get_service_spec(Enveloped), settings)
    await runtime.start()
    return runtime


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = await _runtime()
    try:
        yield runtime
    finally:
        await runtime.close()


def _handler(runtime: ServiceRuntime, name: str) -> Any:
    envelope = HttpEnvelope(runtime)
    steps = NativeSteps(runtime.spec.apis[name], runtime, runtime.settings)
    return envelope.handler(steps.route(envelope))


@pytest.fixture
async def client(runtime: ServiceRuntime) -> AsyncIterator[TestClient]:
    """Each API on `/<api>`, served by the envelope's handler of its route."""
    app = web.Application()
    for name in runtime.spec.apis:
        app.router.add_post(f"/{name}", _handler(runtime, name))
    async with TestClient(TestServer(app)) as test_client:
        yield test_client


async def test_every_route_is_the_envelope_s_one_handler(runtime: ServiceRuntime) -> None:
    """No second handler: whatever an API needs (a Context, a thread, a stream), its
    route's handler is the envelope's, made by the same function."""
    envelope = HttpEnvelope(runtime)
    for name in runtime.spec.apis:
        handler = envelope.handler(NativeSteps(runtime.spec.apis[name], runtime,
                                               runtime.settings).route(envelope))
        assert handler.__qualname__ == "HttpEnvelope.handler.<locals>.handle", name


async def test_with_tracing_every_route_makes_its_span() -> None:
    spans: list[Any] = []

    class Span:
        def __init__(self, info: Any) -> None:
            self.info, self.steps = info, []
            spans.append(self)

        def decoded(self) -> None:
            self.steps.append("decoded")

        def encoding(self) -> None:
            self.steps.append("encoding")

        def finish(self, status: Any) -> None:
            self.steps.append(status)

    class Tracer:
        start = Span

    runtime = await _runtime()
    try:
        runtime.tracing = Tracer()  # type: ignore[assignment]
        app = web.Application()
        app.router.add_post("/add", _handler(runtime, "add"))
        async with TestClient(TestServer(app)) as traced:
            assert (await _post(traced, "/add", b'{"a": 1}')).status == 200
            assert (await _post(traced, "/add", b'{"a": "x"}')).status == 400
    finally:
        runtime.tracing = None
        await runtime.close()
    assert [s.steps for s in spans] == [["decoded", "encoding", 200], [400]]
    assert spans[0].info.api == "add"


#: (api, payload, status, what the body holds: a JSON value, the error's text, or the
#: events of a stream)
CASES = [
    ("add", {"a": 2, "b": 3}, 200, 5),
    ("add", {"a": 2}, 200, 3),
    ("add", {"a": "two"}, 400, "a: Input should be a valid integer, unable to parse "
                               "string as an integer"),            # names the field
    ("add", {}, 400, "a: Field required"),                         # a missing field
    ("add", {"a": 1, "c": 2}, 400, "c: Extra inputs are not permitted"),  # unknown field
    ("norm", {"p": {"x": 3, "y": 4}}, 200, {"norm": 5.0}),
    ("norm", {"p": {"x": 3}}, 400, "p.y: Field required"),        # a nested field
    ("slow", {"seconds": 0.0}, 200, 0.0),
    ("slow", {"seconds": 2.0}, 504, "the request did not complete within 0.3 s"),
    ("slow_def", {"seconds": 2.0}, 504, "the request did not complete within 0.3 s"),
    ("broken", {"a": 1}, 500, "Internal server error"),           # without the traceback
    ("broken_later", {"a": 1}, 500, "Internal server error"),     # after a suspension
    ("with_context", {"a": 4}, 200, 4),                           # a Context
    ("stream", {"n": 3}, 200, ["data: 0", "data: 1", "data: 2"]),  # server-sent events
    ("stream", {"n": 0}, 200, []),                                # no event at all
    ("stream", {"n": "x"}, 400, "n: Input should be a valid integer, unable to parse "
                                "string as an integer"),
    ("stream_def", {"n": 3}, 200, ["data: 0", "data: 1", "data: 2"]),  # stepped in the pool
    ("stream_fails", {"after": 0}, 500, "Internal server error"),  # before the first chunk
    ("stream_fails", {"after": 2}, 200, ["data: line 0", "data: line 1"]),
    ("stream_stalls", {"after": 0}, 504, "the request did not complete within 0.3 s"),
    ("stream_stalls", {"after": 2}, 200, ["data: 0", "data: 1"]),  # then a 504 event
    ("stream_context", {"n": 2}, 200, ["data: 0", "data: 1"]),
]


_JSON = {"Content-Type": "application/json"}


async def _post(client: TestClient, path: str, body: Any, **headers: str) -> Any:
    return await client.post(path, data=body, headers={**_JSON, **headers})


def _without_id(body: bytes) -> Any:
    value = orjson.loads(body)
    if isinstance(value, dict):
        value.pop("request_id", None)
    return value


@pytest.mark.parametrize(("api", "payload", "status", "expected"), CASES)
async def test_each_request_answers_its_value_or_its_error(
        client: TestClient, runtime: ServiceRuntime, api: str, payload: dict[str, Any],
        status: int, expected: Any) -> None:
    resp = await _post(client, f"/{api}", orjson.dumps(payload))
    data = await resp.read()
    assert resp.status == status, data
    if resp.content_type == "text/event-stream":
        events = [e for e in data.decode().split("\n\n") if e]
        assert [e for e in events if not e.startswith("event: error")] == expected
    elif status == 200:
        assert orjson.loads(data) == expected
    else:
        body = orjson.loads(data)
        assert body["error"] == expected
        assert body["request_id"] == resp.headers["X-Request-ID"]
    assert runtime.deadlines.pending == 0
    assert runtime.admission.in_flight == 0


async def test_a_context_api_answers_with_its_headers(client: TestClient) -> None:
    for api in ("with_context", "stream_context"):
        resp = await _post(client, f"/{api}", orjson.dumps({"a": 1, "n": 1}
                                                           if api == "stream_context"
                                                           else {"a": 1}))
        assert resp.status in (200, 400)
    resp = await _post(client, "/with_context", b'{"a": 1}')
    assert (resp.status, resp.headers["X-Seen"]) == (200, "with_context")
    resp = await _post(client, "/stream_context", b'{"n": 1}')
    assert (resp.status, resp.headers["X-Seen"]) == (200, "stream_context")


async def test_a_stream_frames_for_its_client(client: TestClient) -> None:
    """BentoML's client reads raw chunks, every other client events (streams.py)."""
    for agent, media, body in (("BentoML HTTP Client/1.4", "application/json", b"01"),
                               ("curl/8", "text/event-stream", b"data: 0\n\ndata: 1\n\n")):
        resp = await _post(client, "/stream", b'{"n": 2}', **{"User-Agent": agent})
        assert (resp.status, resp.content_type) == (200, media)
        assert await resp.read() == body


async def test_a_stream_is_counted_and_logged(
        client: TestClient, runtime: ServiceRuntime,
        caplog: pytest.LogCaptureFixture) -> None:
    flush()
    ok = _count("stream", "200")
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        resp = await _post(client, "/stream", b'{"n": 2}',
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
        app.router.add_post(f"/{name}", _handler(runtime, name))
    async with TestClient(TestServer(app)) as patched:
        assert (await _post(patched, "/add", b'{"a": 1}')).status == 200
        assert limited == []
        assert (await _post(patched, "/slow", b'{"seconds": 0.01}')).status == 200
        assert limited == [0.3]
        assert (await _post(patched, "/slow", b'{"seconds": 2}')).status == 504
    assert runtime.deadlines.pending == 0


async def test_bad_json_is_a_400(client: TestClient) -> None:
    resp = await _post(client, "/add", b"{not json")
    assert resp.status == 400
    assert "error" in await resp.json()


async def test_an_error_carries_the_request_id_the_client_sent(client: TestClient) -> None:
    for api in ("add", "with_context"):
        resp = await _post(client, f"/{api}", b"{}", **{"X-Request-ID": "req-env-1"})
        assert resp.status == 400
        assert resp.headers.get("X-Request-ID") == "req-env-1"
        assert (await resp.json()).get("request_id") == "req-env-1"


def _count(api: str, status: str) -> float:
    text = render()[0].decode()
    total = 0.0
    for line in text.splitlines():
        if (line.startswith("tensorwire_requests_total{") and f'api="{api}"' in line
                and 'protocol="http"' in line and f'status="{status}"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_count_every_request(client: TestClient,
                                               runtime: ServiceRuntime) -> None:
    flush()  # counts other runtimes of this process still hold go in before the baseline
    ok, bad = _count("add", "200"), _count("add", "400")
    for _ in range(3):
        assert (await _post(client, "/add", b'{"a": 1}')).status == 200
    assert (await _post(client, "/add", b'{"a": "x"}')).status == 400
    runtime.admission.flush()
    assert _count("add", "200") == ok + 3
    assert _count("add", "400") == bad + 1


async def test_access_lines_are_written_for_every_request(
        client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        assert (await _post(client, "/add", b'{"a": 1}',
                            **{"X-Request-ID": "access-1"})).status == 200
        assert (await _post(client, "/add", b'{"a": "x"}')).status == 400
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorwire.access"]
    assert len(lines) == 2, lines
    assert "access-1" in lines[0] and "200" in lines[0]
    assert "400" in lines[1]


@pytest.mark.parametrize("api", ["add", "with_context", "stream"])
async def test_draining_refuses_every_request(client: TestClient, runtime: ServiceRuntime,
                                              api: str) -> None:
    flush()
    before = _count(api, "503")
    runtime.admission.draining = True
    try:
        resp = await _post(client, f"/{api}", b'{"a": 1, "n": 1}')
    finally:
        runtime.admission.draining = False
    assert resp.status == 503
    assert (await resp.json())["error"] == ("the server is shutting down; retry on "
                                            "another instance")
    runtime.admission.flush()
    assert _count(api, "503") == before + 1
    assert runtime.admission.in_flight == 0


async def test_a_runtime_not_ready_refuses_requests(client: TestClient,
                                                    runtime: ServiceRuntime) -> None:
    runtime.ready = False
    try:
        resp = await _post(client, "/add", b'{"a": 1}')
    finally:
        runtime.ready = True
    assert (resp.status, (await resp.json())["error"]) == (503, "the service is not ready")


async def test_a_chunked_body_is_read_in_bounded_steps(client: TestClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"a": '
        yield b"41}"

    resp = await _post(client, "/add", chunks())
    assert resp.status == 200
    assert await resp.json() == 42


async def test_a_stream_chunk_past_the_time_limit_ends_in_a_504_event(
        client: TestClient) -> None:
    resp = await _post(client, "/stream_stalls", b'{"after": 2}')
    events = (await resp.read()).decode().split("\n\n")
    assert resp.status == 200
    assert events[:2] == ["data: 0", "data: 1"]
    assert events[2].startswith("event: error\ndata: ")
    assert orjson.loads(events[2].split("data: ", 1)[1])["status"] == 504
