"""`tensorwire.http.responses`: the error model as an HTTP status, JSON body and headers;
aiohttp's own refusals (router, body limit, parser) mapped into it; the per-route JSON
wrapper and the catch-all 404/405 route."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, LineTooLong
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from tensorwire import errors
from tensorwire.errors import ERROR_KIND_HEADER
from tensorwire.http.responses import (
    error_response,
    from_http_exception,
    from_protocol_error,
    json_errors,
    unmatched,
)

SERVER_ERRORS = [
    errors.InvalidArgument, errors.Unauthenticated, errors.PermissionDenied,
    errors.NotFound, errors.MethodNotAllowed, errors.NotAcceptable,
    errors.PayloadTooLarge, errors.UnsupportedMediaType, errors.Cancelled,
    errors.Unimplemented, errors.Overloaded, errors.ServiceUnavailable,
    errors.DeadlineExceeded, errors.InsufficientStorage,
]


def _body(response: web.Response) -> dict:
    assert isinstance(response.body, bytes)
    return orjson.loads(response.body)


@pytest.mark.parametrize("cls", SERVER_ERRORS, ids=lambda c: c.__name__)
def test_each_error_class_is_its_status_its_message_and_its_kind(
        cls: type[errors.TensorwireError]) -> None:
    response = error_response(cls("what went wrong"))
    assert response.status == cls.http_status
    assert _body(response) == {"error": "what went wrong"}
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers[ERROR_KIND_HEADER] == cls.__name__
    assert "X-Request-ID" not in response.headers


def test_a_request_id_is_in_the_body_and_a_header() -> None:
    response = error_response(errors.NotFound("no such API"), request_id="r-42")
    assert _body(response) == {"error": "no such API", "request_id": "r-42"}
    assert response.headers["X-Request-ID"] == "r-42"


def test_field_violations_are_the_body_s_detail() -> None:
    err = errors.InvalidArgument.at(["items", 2], "must be positive")
    assert _body(error_response(err)) == {
        "error": "items.2: must be positive",
        "detail": [{"loc": ["items", 2], "msg": "must be positive", "type": "value_error"}]}


def test_a_private_error_shows_no_message_but_keeps_its_status() -> None:
    class Leaky(errors.InternalError):
        pass

    response = error_response(Leaky("password=hunter2 in /srv/secret", status=502),
                              request_id="r-1")
    assert response.status == 502
    assert _body(response) == {"error": "Internal server error", "request_id": "r-1"}
    assert response.headers[ERROR_KIND_HEADER] == "InternalError"


def test_a_user_subclass_is_named_by_its_built_in_base() -> None:
    class OutOfStock(errors.InvalidArgument):
        """No more of that item."""

    response = error_response(OutOfStock())
    assert response.status == 400
    assert _body(response) == {"error": "No more of that item"}
    assert response.headers[ERROR_KIND_HEADER] == "InvalidArgument"


def test_the_error_s_own_headers_are_sent() -> None:
    err = errors.Overloaded("busy", headers={"Retry-After": "1"})
    response = error_response(err)
    assert response.status == 503
    assert response.headers["Retry-After"] == "1"
    assert response.headers["Content-Type"] == "application/json"


def test_router_exceptions_map_into_the_error_model() -> None:
    err = from_http_exception(web.HTTPNotFound())
    assert (type(err), err.message, err.status_code) == (errors.NotFound, "no such route", 404)

    err = from_http_exception(web.HTTPMethodNotAllowed("POST", ["GET", "HEAD"]))
    assert type(err) is errors.MethodNotAllowed and err.status_code == 405
    assert err.headers["Allow"] == "GET,HEAD"
    assert err.message == "Method Not Allowed"

    too_large = web.HTTPRequestEntityTooLarge(max_size=10, actual_size=20)
    err = from_http_exception(too_large)
    assert type(err) is errors.PayloadTooLarge and err.status_code == 413
    assert err.message == f"request body too large: {too_large.text}"

    err = from_http_exception(web.HTTPUnsupportedMediaType())
    assert type(err) is errors.UnsupportedMediaType and err.status_code == 415


def test_an_unmapped_router_status_is_kept_on_a_private_error() -> None:
    err = from_http_exception(web.HTTPBadRequest())
    assert type(err) is errors.InternalError and err.status_code == 400
    assert error_response(err).status == 400


def test_parser_refusals_name_the_fault_without_the_client_s_bytes() -> None:
    err = from_protocol_error(400, LineTooLong(b"GET /" + b"a" * 9000, 8190))
    assert type(err) is errors.InvalidArgument and err.status_code == 400
    assert err.message == ("malformed HTTP request: a request line or header is longer "
                           "than 8190 bytes")

    err = from_protocol_error(400, BadHttpMessage("Invalid method encountered:\n\n"
                                                  "  b'GE\\x00T'\n    ^"))
    assert err.message == "malformed HTTP request: Invalid method encountered"

    err = from_protocol_error(400, None)
    assert err.message == "malformed HTTP request: Bad Request"
    err = from_protocol_error(499, None)
    assert err.message == "malformed HTTP request: refused by the parser"


def test_parser_statuses_map_to_their_class() -> None:
    err = from_protocol_error(413, None)
    assert type(err) is errors.PayloadTooLarge and err.status_code == 413
    err = from_protocol_error(500, RuntimeError("the handler's bug"))
    assert type(err) is errors.InternalError and err.status_code == 500
    own = errors.InvalidArgument("refused by our own check")
    assert from_protocol_error(400, own) is own


async def test_json_errors_gives_router_exceptions_the_json_body() -> None:
    async def gone(request: web.Request) -> web.StreamResponse:
        raise web.HTTPNotFound()

    async def moved(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/elsewhere")

    async def fine(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    request = make_mocked_request("GET", "/x")
    response = await json_errors(gone)(request)
    assert isinstance(response, web.Response)
    assert response.status == 404 and _body(response) == {"error": "no such route"}
    with pytest.raises(web.HTTPFound):  # not an error: aiohttp answers it
        await json_errors(moved)(request)
    assert (await json_errors(fine)(request)).text == "ok"
    assert json_errors(fine).__name__ == "fine"


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    """An app with one GET and one POST route, then the catch-all."""

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/read", ok)
    app.router.add_post("/write", ok)
    app.router.add_put("/write", ok)
    app.router.add_route("*", "/{_unmatched:.*}", unmatched)
    async with TestClient(TestServer(app)) as client:
        yield client


async def test_unmatched_answers_404_for_an_unknown_path(client: TestClient) -> None:
    response = await client.get("/nowhere")
    assert response.status == 404
    assert await response.json() == {"error": "no such route"}
    assert response.headers[ERROR_KIND_HEADER] == "NotFound"


async def test_unmatched_answers_405_with_allow_for_a_known_path(client: TestClient) -> None:
    response = await client.delete("/write")
    assert response.status == 405
    assert set(response.headers["Allow"].split(",")) == {"POST", "PUT"}
    assert await response.json() == {"error": "Method Not Allowed"}
    assert response.headers[ERROR_KIND_HEADER] == "MethodNotAllowed"
    assert (await client.get("/read")).status == 200
