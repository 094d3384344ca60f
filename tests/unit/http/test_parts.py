"""`tensorwire.http.parts`: a request body or one multipart part as the `Part` a codec
reads (name, media type, file name, bytes counted against the limits), and aiohttp's
multipart refusals as a 400 that quotes no client bytes."""

from __future__ import annotations

import gzip
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.test_utils import TestClient, TestServer

from tensorwire.errors import InvalidArgument, TensorwireError
from tensorwire.http.parts import BodyPart, MultipartPart, malformed_multipart, media_type_of


@pytest.mark.parametrize(("header", "media_type"), [
    (None, None),
    ("", None),
    ("application/json", "application/json"),
    ("Application/JSON; charset=utf-8", "application/json"),
    ("  text/plain  ;format=flowed", "text/plain"),
    ("; charset=utf-8", None),
])
def test_media_type_of_is_the_lowercase_type_without_parameters(header, media_type) -> None:
    assert media_type_of(header) == media_type


Handle = Callable[[web.Request], Awaitable[dict]]


async def _client(handle: Handle) -> TestClient:
    """A server whose one route answers what `handle` reports, or the error it raised;
    aiohttp's own inflation off, as the server runs it (`tensorwire.http.body`)."""

    async def route(request: web.Request) -> web.Response:
        try:
            return web.json_response(await handle(request))
        except TensorwireError as exc:
            return web.json_response({"error": exc.message, "class": type(exc).__name__},
                                     status=exc.status_code)

    app = web.Application(client_max_size=1024)
    app.router.add_post("/", route)
    server = TestServer(app)
    await server.start_server(auto_decompress=False)
    client = TestClient(server)
    await client.start_server()
    return client


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handle], Awaitable[TestClient]]]:
    clients: list[TestClient] = []

    async def start(handle: Handle) -> TestClient:
        client = await _client(handle)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


async def test_a_body_part_reads_the_whole_body_once_and_counts_it(serve) -> None:
    async def handle(request: web.Request) -> dict:
        part = BodyPart(request, "image", limit=1024)
        data = await part.read()
        return {"name": part.name, "media_type": part.media_type, "filename": part.filename,
                "data": data.decode(), "consumed": part.consumed}

    client = await serve(handle)
    response = await client.post("/", data=b"hello", headers={
        "Content-Type": "Text/Plain; charset=utf-8",
        "Content-Disposition": 'attachment; filename="greeting.txt"'})
    assert await response.json() == {"name": "image", "media_type": "text/plain",
                                     "filename": "greeting.txt", "data": "hello",
                                     "consumed": 5}
    response = await client.post("/", data=b"x", headers={"Content-Type": ""})
    assert (await response.json())["media_type"] is None
    assert (await response.json())["filename"] is None


async def test_a_body_part_names_an_rfc_5987_file_name(serve) -> None:
    async def handle(request: web.Request) -> dict:
        return {"filename": BodyPart(request, "f", limit=1024).filename}

    client = await serve(handle)
    response = await client.post("/", data=b"x", headers={
        "Content-Disposition": "attachment; filename*=UTF-8''caf%C3%A9.png"})
    assert await response.json() == {"filename": "caf\u00e9.png"}


async def test_a_compressed_body_part_is_read_and_saved_inflated(serve, tmp_path: Path
                                                                  ) -> None:
    payload = b"0123456789" * 50

    async def handle(request: web.Request) -> dict:
        part = BodyPart(request, "blob", limit=1024)
        if request.query.get("save"):
            size = await part.save(tmp_path / "blob")
            return {"size": size, "consumed": part.consumed,
                    "same": (tmp_path / "blob").read_bytes() == payload}
        return {"same": await part.read() == payload, "consumed": part.consumed}

    client = await serve(handle)
    headers = {"Content-Encoding": "gzip"}
    response = await client.post("/", data=gzip.compress(payload), headers=headers)
    assert await response.json() == {"same": True, "consumed": 500}
    response = await client.post("/?save=1", data=gzip.compress(payload), headers=headers)
    assert await response.json() == {"size": 500, "consumed": 500, "same": True}


async def test_a_body_part_past_its_limit_is_413(serve, tmp_path: Path) -> None:
    async def handle(request: web.Request) -> dict:
        part = BodyPart(request, "blob", limit=1024)
        if request.query.get("save"):
            await part.save(tmp_path / "blob")
        else:
            await part.read()
        return {}

    client = await serve(handle)
    for query in ("", "?save=1"):
        response = await client.post("/" + query, data=b"x" * 2000)
        assert response.status == 413, query
        assert await response.json() == {
            "error": "request body exceeds the limit of 1024 bytes",
            "class": "PayloadTooLarge"}
    bomb = gzip.compress(b"\x00" * 100_000)
    response = await client.post("/", data=bomb, headers={"Content-Encoding": "gzip"})
    assert response.status == 413
    assert "exceeds the limit of 1024 bytes" in (await response.json())["error"]


def _form(*parts: tuple[str, bytes, str | None, str | None]) -> aiohttp.MultipartWriter:
    writer = aiohttp.MultipartWriter("form-data")
    for name, data, filename, media_type in parts:
        part = writer.append(data, {"Content-Type": media_type or "application/octet-stream"})
        if media_type is None:
            del part.headers["Content-Type"]
        part.set_content_disposition("form-data", name=name,
                                     **({"filename": filename} if filename else {}))
    return writer


def _multipart(limit: int, part_limit: int | None, save_to: Path | None = None) -> Handle:
    """Each part read (or saved) through MultipartPart with the budgets given; the
    request's budget shrinks by what each part consumed, as the server does."""

    async def handle(request: web.Request) -> dict:
        reader = await request.multipart()
        left, out = limit, []
        while (field := await reader.next()) is not None:
            assert isinstance(field, aiohttp.BodyPartReader)
            part = MultipartPart(field, left, part_limit)
            if save_to is not None:
                size = await part.save(save_to / part.name)
                data = (save_to / part.name).read_bytes()
                assert size == len(data)
            else:
                data = await part.read()
            left -= part.consumed
            out.append({"name": part.name, "filename": part.filename,
                        "media_type": part.media_type, "data": data.decode(),
                        "consumed": part.consumed})
        return {"parts": out}

    return handle


async def test_multipart_parts_carry_their_name_file_name_and_media_type(serve) -> None:
    client = await serve(_multipart(limit=1024, part_limit=None))
    form = _form(("text", b"hi", None, "Text/Plain; charset=utf-8"),
                 ("file", b"abc", "a.csv", "text/csv"), ("bare", b"{}", None, None))
    response = await client.post("/", data=form)
    assert await response.json() == {"parts": [
        {"name": "text", "filename": None, "media_type": "text/plain", "data": "hi",
         "consumed": 2},
        {"name": "file", "filename": "a.csv", "media_type": "text/csv", "data": "abc",
         "consumed": 3},
        {"name": "bare", "filename": None, "media_type": None, "data": "{}", "consumed": 2}]}


async def test_multipart_parts_save_to_a_file(serve, tmp_path: Path) -> None:
    client = await serve(_multipart(limit=1024, part_limit=None, save_to=tmp_path))
    response = await client.post("/", data=_form(("f", b"x" * 300, "f.bin", None)))
    assert (await response.json())["parts"][0]["consumed"] == 300
    assert (tmp_path / "f").read_bytes() == b"x" * 300


async def test_a_part_past_the_per_part_limit_is_413(serve) -> None:
    client = await serve(_multipart(limit=1000, part_limit=100))
    response = await client.post("/", data=_form(("small", b"x" * 100, None, None),
                                                 ("big", b"y" * 101, "big.bin", None)))
    assert response.status == 413
    assert await response.json() == {
        "error": "part 'big' is too large: a part may carry at most 100 bytes",
        "class": "PayloadTooLarge"}


async def test_parts_share_what_is_left_of_the_request_s_budget(serve, tmp_path: Path
                                                                ) -> None:
    for save_to in (None, tmp_path):
        client = await serve(_multipart(limit=500, part_limit=400, save_to=save_to))
        response = await client.post("/", data=_form(("a", b"x" * 300, None, None),
                                                     ("b", b"y" * 250, "b.bin", None)))
        assert response.status == 413
        assert await response.json() == {
            "error": "part 'b' is too large: the request may carry at most 200 more bytes",
            "class": "PayloadTooLarge"}


def test_malformed_multipart_is_400_naming_the_fault_without_client_bytes() -> None:
    err = malformed_multipart(LineTooLong(b"Content-Disposition: " + b"x" * 9000, 8190))
    assert isinstance(err, InvalidArgument) and err.status_code == 400
    assert err.message == ("malformed multipart body: a part header line is longer than "
                           "8190 bytes")
    assert "xxx" not in err.message
    err = malformed_multipart(HttpProcessingError(message="Invalid boundary"))
    assert err.message == "malformed multipart body: Invalid boundary"
    err = malformed_multipart(ValueError("reader did not find the closing boundary"))
    assert err.message == ("malformed multipart body: reader did not find the closing "
                           "boundary")
