"""`tensorwire.http.native`: the steps of one API's own HTTP route, called directly: which
requests take the plain-JSON path (`plain_length`), how every other body shape is read
(`decode`: size, media type, multipart parts) and what an answer carries (`answer`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

import tensorwire
from tensorwire.codecs import UnsupportedBody
from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.errors import TensorwireError
from tensorwire.http.native import NativeSteps, unsupported_media
from tensorwire.http.request_envelope import HttpEnvelope
from tensorwire.http.responses import error_response
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings

LIMIT = 1000


@tensorwire.service
class Native:
    @tensorwire.api
    def add(self, a: int, b: int = 1) -> int:
        return a + b

    @tensorwire.api
    def shout(self, text: str, /) -> str:
        return text.upper()

    @tensorwire.api
    def upload(self, f: Path, note: str = "") -> int:
        return f.stat().st_size


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    settings = Settings(max_request_size=LIMIT, max_parts=4, max_part_size=100)
    runtime = ServiceRuntime(tensorwire.get_service_spec(Native), settings)
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


def _steps(runtime: ServiceRuntime, name: str) -> NativeSteps:
    return NativeSteps(runtime.spec.apis[name], runtime, runtime.settings)


@pytest.mark.parametrize(("headers", "length"), [
    ({"Content-Length": "12"}, 12),
    ({"Content-Length": "12", "Content-Type": "application/json"}, 12),
    ({"Content-Length": "12", "Content-Type": "application/json; charset=utf-8"}, 12),
    ({"Content-Length": "12", "Content-Type": "application/json;charset=utf-8"}, 12),
    ({"Content-Length": "12", "Content-Type": "application/json; charset=UTF-8"}, 12),
    ({"Content-Length": str(LIMIT)}, LIMIT),
    # every other request is read by `decode` (a 413, a 415, a lenient JSON type, ...)
    ({"Content-Length": str(LIMIT + 1)}, -1),
    ({"Content-Type": "application/json"}, -1),  # chunked: no length to trust
    ({"Content-Length": "12", "Content-Type": "text/plain"}, -1),
    ({"Content-Length": "12", "Content-Type": "application/x-www-form-urlencoded"}, -1),
    ({"Content-Length": "12", "Content-Type": "application/json; charset=latin-1"}, -1),
    ({"Content-Length": "12", "Content-Type": "multipart/form-data; boundary=x"}, -1),
    ({"Content-Length": "12", "Content-Encoding": "gzip"}, -1),
    ({"Content-Length": "12", "Content-Type": "application/json",
      "Content-Encoding": "identity"}, -1),
])
async def test_plain_length_takes_only_a_plain_json_body_within_the_limit(
        runtime: ServiceRuntime, headers: dict[str, str], length: int) -> None:
    request = make_mocked_request("POST", "/add", headers=headers)
    assert _steps(runtime, "add").plain_length(request) == length


async def test_only_an_api_of_json_fields_offers_the_plain_path(runtime: ServiceRuntime
                                                                ) -> None:
    envelope = HttpEnvelope(runtime)
    plain = _steps(runtime, "add").route(envelope)
    assert plain.plain_length is not None and plain.decode_json is not None
    assert plain.decode_json(b'{"a": 2}') == {"a": 2, "b": 1}
    for name in ("shout", "upload"):  # a root input, a file input: read by `decode`
        route = _steps(runtime, name).route(envelope)
        assert route.plain_length is None and route.decode_json is None, name
        assert route.stream is None


@pytest.fixture
async def client(runtime: ServiceRuntime, tmp_path: Path) -> AsyncIterator[TestClient]:
    """`POST /<api>` answers the arguments `decode` read, or the error it raised."""

    def route(name: str) -> Any:
        steps = _steps(runtime, name)

        async def handle(request: web.Request) -> web.Response:
            ctx = Context(RequestInfo("http", name, Headers()))
            scope = steps.plan.scope if not steps.plan.needs_context else ctx
            try:
                values = await steps.decode(request, scope)
            except TensorwireError as exc:
                return error_response(exc)
            return web.json_response({k: str(v) if isinstance(v, Path) else v
                                      for k, v in values.items()})

        return handle

    app = web.Application(client_max_size=10 * LIMIT)
    for name in runtime.spec.apis:
        app.router.add_post(f"/{name}", route(name))
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_a_declared_length_past_the_limit_is_413_before_reading(client: TestClient
                                                                      ) -> None:
    response = await client.post("/add", data=b" " * (LIMIT + 1),
                                 headers={"Content-Type": "application/json"})
    assert response.status == 413
    assert (await response.json())["error"] == (
        f"request body of {LIMIT + 1} bytes exceeds the limit of {LIMIT} bytes")


async def test_json_read_by_decode_for_lenient_media_types(client: TestClient) -> None:
    for media in ("application/x-www-form-urlencoded", "text/json",
                  "application/problem+json", "Application/JSON"):
        response = await client.post("/add", data=b'{"a": 4}',
                                     headers={"Content-Type": media})
        assert await response.json() == {"a": 4, "b": 1}, media


async def test_another_media_type_is_415_naming_what_the_api_takes(client: TestClient
                                                                   ) -> None:
    response = await client.post("/add", data=b"a,b", headers={"Content-Type": "text/csv"})
    assert response.status == 415
    assert (await response.json())["error"] == (
        "unsupported media type text/csv; this API takes application/json")
    response = await client.post("/upload", data=b"a,b", headers={"Content-Type": "text/csv"})
    assert response.status == 415
    assert (await response.json())["error"] == (
        "unsupported media type text/csv; this API takes multipart/form-data")
    response = await client.post("/upload", json={"note": "x"})
    assert response.status == 415
    assert (await response.json())["error"] == "upload takes files: send multipart/form-data"


async def test_a_root_input_is_the_whole_body(client: TestClient) -> None:
    response = await client.post("/shout", data=b"quiet",
                                 headers={"Content-Type": "text/plain"})
    assert await response.json() == {"text": "quiet"}
    response = await client.post("/shout", data=b"<x/>",
                                 headers={"Content-Type": "application/xml"})
    assert response.status == 415
    body = await response.json()
    assert body["detail"] == [{"loc": ["text"], "msg": body["error"].removeprefix("text: "),
                               "type": "content_type"}]


def _form(*parts: tuple[str, bytes]) -> aiohttp.MultipartWriter:
    writer = aiohttp.MultipartWriter("form-data")
    for name, data in parts:
        writer.append(data, {"Content-Type": "application/json"}).set_content_disposition(
            "form-data", name=name)
    return writer


async def test_multipart_fields_are_json_parts(client: TestClient) -> None:
    response = await client.post("/add", data=_form(("a", b"2"), ("b", b"3")))
    assert await response.json() == {"a": 2, "b": 3}


async def test_a_part_no_field_takes_is_refused_naming_the_fields(client: TestClient
                                                                  ) -> None:
    response = await client.post("/add", data=_form(("a", b"2"), ("c", b"3")))
    assert response.status == 400
    assert (await response.json())["detail"] == [
        {"loc": ["c"], "msg": "unexpected part; this API takes: a, b",
         "type": "extra_forbidden"}]


async def test_a_field_sent_twice_is_refused(client: TestClient) -> None:
    response = await client.post("/add", data=_form(("a", b"2"), ("a", b"3")))
    assert response.status == 400
    assert (await response.json())["detail"] == [
        {"loc": ["a"], "msg": "duplicated part", "type": "duplicate_part"}]


async def test_a_root_input_takes_exactly_one_part_whatever_its_name(client: TestClient
                                                                     ) -> None:
    writer = aiohttp.MultipartWriter("form-data")
    writer.append(b"hello", {"Content-Type": "text/plain"}).set_content_disposition(
        "form-data", name="anything")
    assert await (await client.post("/shout", data=writer)).json() == {"text": "hello"}
    response = await client.post("/shout", data=_form(("text", b'"a"'), ("text", b'"b"')))
    assert response.status == 400
    assert (await response.json())["detail"] == [
        {"loc": ["text"], "msg": "a root input takes exactly one part",
         "type": "too_many_parts"}]


async def test_the_part_limit_applies_to_each_part(client: TestClient) -> None:
    response = await client.post("/add", data=_form(("a", b" " * 100 + b"1")))
    assert response.status == 413
    assert (await response.json())["error"] == (
        "part 'a' is too large: a part may carry at most 100 bytes")


async def test_nested_and_malformed_multipart_bodies_are_400(client: TestClient) -> None:
    outer = aiohttp.MultipartWriter("form-data")
    inner = aiohttp.MultipartWriter("mixed")
    inner.append(b"1")
    outer.append(inner).set_content_disposition("form-data", name="a")
    response = await client.post("/add", data=outer)
    assert response.status == 400
    assert (await response.json())["error"] == "nested multipart bodies are not supported"

    unterminated = (b'--xx\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n')
    response = await client.post("/add", data=unterminated, headers={
        "Content-Type": "multipart/form-data; boundary=xx"})
    assert response.status == 400
    assert (await response.json())["error"].startswith("malformed multipart body: ")


def test_unsupported_media_names_the_field_as_a_validation_error_does() -> None:
    err = unsupported_media("image", UnsupportedBody("text/plain", "image/png"))
    assert err.status_code == 415
    assert err.message == ("image: unsupported media type text/plain; expected image/png")
    assert err.detail == [{"loc": ["image"], "msg": "unsupported media type text/plain; "
                           "expected image/png", "type": "content_type"}]


async def test_an_answer_carries_the_codec_s_body_and_the_context_s_status_and_headers(
        runtime: ServiceRuntime) -> None:
    steps = _steps(runtime, "shout")
    request = make_mocked_request("POST", "/shout")
    plain = steps.answer("HI", request, None, None)
    assert isinstance(plain, web.Response)
    assert (plain.status, plain.body, plain.headers["Content-Type"]) == (
        200, b"HI", "text/plain; charset=utf-8")
    ctx = Context(RequestInfo("http", "shout", Headers()))
    ctx.response.status_code = 201
    ctx.response.headers["X-Seen"] = "yes"
    answered = steps.answer("HI", request, ctx, None)
    assert isinstance(answered, web.Response)
    assert answered.status == 201
    assert answered.headers["X-Seen"] == "yes"
    assert answered.headers["Content-Type"] == "text/plain; charset=utf-8"
