"""`tensorwire.v2.routes`: the Open Inference Protocol's HTTP routes over one Repository,
installed on a bare aiohttp app with the one envelope: the error statuses the protocol
asks for, the repository index's options, readiness reasons, infer dispatch and size
limit, and how an answer is written (joined when small, chunk by chunk when big)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import tensorwire
from tensorwire import errors
from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.http.request_envelope import HttpEnvelope
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.v2 import routes
from tensorwire.v2.repository import Repository
from tensorwire.v2.routes import V2Routes, respond
from tensorwire.wire import oip

IHCL = oip.INFERENCE_HEADER_CONTENT_LENGTH


@tensorwire.service
class RoutedPlane:
    @tensorwire.api
    def double(self, x: np.ndarray) -> np.ndarray:
        return x * 2

    @tensorwire.api
    async def ticks(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i


@pytest.mark.parametrize(("err", "status"), [
    (errors.InvalidArgument("bad"), 400),
    (errors.UnsupportedMediaType("bad type"), 400),  # tritonclient sends no media type
    (errors.NotAcceptable("no"), 400),
    (errors.NotFound("no such model"), 404),
    (errors.Unimplemented("a stream"), 501),
    (errors.PayloadTooLarge("big"), 413),
])
def test_every_invalid_argument_is_400_as_the_protocol_asks(err: errors.TensorwireError,
                                                           status: int) -> None:
    response = routes._error(err, "r1")
    assert response.status == status
    assert isinstance(response.body, bytes)
    assert orjson.loads(response.body) == {"error": err.message, "request_id": "r1"}
    assert response.headers[errors.ERROR_KIND_HEADER] == type(err).__name__


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = ServiceRuntime(tensorwire.get_service_spec(RoutedPlane),
                             Settings(max_request_size=4096))
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture
async def served(runtime: ServiceRuntime) -> AsyncIterator[tuple[TestClient, V2Routes]]:
    v2 = V2Routes(Repository(runtime), runtime.settings)
    app = web.Application(client_max_size=1 << 20)
    v2.install(app.router, HttpEnvelope(runtime))
    async with TestClient(TestServer(app)) as client:
        yield client, v2


async def test_install_makes_one_infer_handler_per_model(served) -> None:
    _, v2 = served
    assert list(v2.handlers) == ["double", "ticks"]


async def test_the_index_reads_its_options(served, runtime: ServiceRuntime) -> None:
    client, _ = served
    everything = await (await client.post("/v2/repository/index")).json()
    assert [(m["name"], m["state"]) for m in everything] == [
        ("double", "READY"), ("ticks", "READY")]  # a stream: a decoupled model
    runtime.admission.draining = True
    ready = await client.post("/v2/repository/index", data=b'{"ready": true}')
    assert [m["name"] for m in await ready.json()] == []
    runtime.admission.draining = False
    not_only = await client.post("/v2/repository/index", data=b'{"ready": "yes"}')
    assert len(await not_only.json()) == 2  # only `true` filters
    for body, says in ((b"{not json", "the request is not valid JSON: "),
                       (b"[1]", "the request must be a JSON object")):
        response = await client.post("/v2/repository/index", data=body)
        assert response.status == 400
        assert (await response.json())["error"].startswith(says)


async def test_readiness_says_why_not(served, runtime: ServiceRuntime) -> None:
    client, _ = served
    response = await client.get("/v2/models/ticks/versions/1/ready")
    assert await response.json() == {"name": "ticks", "ready": True}  # decoupled
    response = await client.get("/v2/models/double/ready")
    assert await response.json() == {"name": "double", "ready": True}
    runtime.admission.draining = True
    response = await client.get("/v2/models/double/ready")
    assert (response.status, await response.json()) == (
        400, {"name": "double", "ready": False, "error": "the server is not ready"})
    response = await client.get("/v2/health/ready")
    assert (response.status, await response.json()) == (
        400, {"ready": False, "error": "the server is not ready"})
    assert await (await client.get("/v2/health/live")).json() == {"live": True}


async def test_infer_names_an_unknown_model_or_version_before_admission(served) -> None:
    client, v2 = served
    calls: list[str] = []
    handler = v2.handlers["double"]

    async def spy(request: web.Request) -> web.StreamResponse:
        calls.append(request.match_info["model"])
        return await handler(request)

    v2.handlers["double"] = spy
    for path in ("/v2/models/nope/infer", "/v2/models/double/versions/2/infer"):
        response = await client.post(path, data=b"{}")
        assert response.status == 404, path
    assert calls == []
    body = {"inputs": [{"name": "x", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}
    response = await client.post("/v2/models/double/versions/1/infer", json=body)
    assert (await response.json())["outputs"][0]["data"] == [2, 4]
    assert calls == ["double"]


async def test_infer_refuses_a_declared_body_over_the_limit(served) -> None:
    client, _ = served
    response = await client.post("/v2/models/double/infer", data=b" " * 5000)
    assert response.status == 413
    assert (await response.json())["error"] == (
        "request body of 5000 bytes exceeds the limit of 4096 bytes")


async def test_infer_answers_binary_outputs_with_the_header_length(served) -> None:
    client, _ = served
    x = np.arange(3, dtype=np.int32)
    head = orjson.dumps({"inputs": [{"name": "x", "datatype": "INT32", "shape": [3],
                                     "parameters": {"binary_data_size": 12}}],
                         "id": "q7", "parameters": {"binary_data_output": True}})
    response = await client.post("/v2/models/double/infer", data=head + x.tobytes(),
                                 headers={IHCL: str(len(head))})
    assert response.status == 200
    assert response.headers["Content-Type"] == "application/octet-stream"
    body = await response.read()
    length = int(response.headers[IHCL])
    header = orjson.loads(body[:length])
    assert header["id"] == "q7"
    assert np.frombuffer(body[length:], np.int32).tolist() == [0, 2, 4]


def _built(size: int, binary: bool = True) -> oip.HttpInferResponse:
    outputs = [oip.ResponseOutput("y", np.arange(size, dtype=np.uint8), binary=binary)]
    return oip.build_http_infer_response(outputs, model_name="m", model_version="1")


async def _respond_via(built: oip.HttpInferResponse, ctx: Context | None,
                       seen: list[Any]) -> tuple[int, dict[str, str], bytes]:
    async def handle(request: web.Request) -> web.StreamResponse:
        answer = respond(request, built, ctx)
        seen.append(answer)
        return answer if isinstance(answer, web.StreamResponse) else await answer

    app = web.Application()
    app.router.add_get("/", handle)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/")
        return response.status, dict(response.headers), await response.read()


async def test_a_small_answer_is_joined_with_its_headers() -> None:
    ctx = Context(RequestInfo("http", "m", Headers()))
    ctx.response.headers["X-Seen"] = "1"
    built = _built(10)
    seen: list[Any] = []
    status, headers, body = await _respond_via(built, ctx, seen)
    assert isinstance(seen[0], web.Response)
    assert status == 200 and body == built.body()
    assert headers[IHCL] == str(built.header_length) and headers["X-Seen"] == "1"
    json_only = _built(3, binary=False)
    _, headers, body = await _respond_via(json_only, None, [])
    assert IHCL not in headers and headers["Content-Type"] == "application/json"
    assert orjson.loads(body)["outputs"][0]["data"] == [0, 1, 2]


async def test_a_big_answer_is_written_chunk_by_chunk(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    monkeypatch.setattr(routes, "JOIN_LIMIT", 64)
    built = _built(1000)
    assert built.content_length > 64 and len(built.chunks) == 2
    seen: list[Any] = []
    status, headers, body = await _respond_via(built, None, seen)
    assert not isinstance(seen[0], web.StreamResponse)  # a coroutine that writes
    assert status == 200 and body == built.body()
    assert headers["Content-Length"] == str(built.content_length)
    assert headers[IHCL] == str(built.header_length)
