"""The HTTP client's tensor / file / image / multipart wire forms, against a real aiohttp
server that speaks the contract the tensor and file codecs publish (`type: array` +
`format: numpy-array`, `type: file`, `pil: true`, multipart responses). When those
codecs are served by tensorwire itself, the e2e table covers the same paths."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator

import numpy as np
import pytest
from aiohttp import MultipartWriter, web

import tensorwire
from tensorwire.client.tensors import NPY, dumps_npy, loads_npy

TENSOR = {"type": "array", "format": "numpy-array", "dtype": "float32"}
FILE = {"type": "file", "format": "binary"}
IMAGE = {"type": "file", "format": "image", "pil": True}


def route(name, inp, out):
    return {"name": name, "route": f"/{name}", "input": inp, "output": out}


SCHEMA = {"name": "Wire", "type": "service", "routes": [
    route("scale", {"type": "object", "properties": {"x": TENSOR, "k": {"type": "number"}},
                    "required": ["x"]}, TENSOR),
    route("total", {**TENSOR, "root_input": True, "root_field": "x"}, {"type": "number"}),
    route("upload", {"type": "object", "properties": {
        "file": FILE, "pages": {"type": "array", "items": FILE},
        "meta": {"type": "object", "properties": {"x": TENSOR}}}}, {"type": "object"}),
    route("store", {**FILE, "root_input": True, "root_field": "blob"}, {"type": "integer"}),
    route("report", {"type": "object", "properties": {}}, FILE),
    route("picture", {"type": "object", "properties": {}}, IMAGE),
    route("both", {"type": "object", "properties": {}}, {"type": "object", "properties": {
        "image": IMAGE, "mask": TENSOR, "label": {"type": "string"}}}),
]}


def png_bytes(color: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("L", (3, 2), color).save(out, format="PNG")
    return out.getvalue()


def app() -> web.Application:
    seen: dict[str, object] = {}

    async def schema(_: web.Request) -> web.Response:
        return web.json_response(SCHEMA)

    async def scale(request: web.Request) -> web.Response:
        body = await request.json()
        seen["scale_accept"] = request.headers.get("Accept")
        out = np.asarray(body["x"], dtype=np.float32) * body.get("k", 1)
        if NPY in (request.headers.get("Accept") or ""):
            return web.Response(body=dumps_npy(out), content_type=NPY)
        return web.json_response(out.tolist())

    async def total(request: web.Request) -> web.Response:
        assert request.content_type == NPY
        return web.json_response(float(loads_npy(await request.read()).sum()))

    async def upload(request: web.Request) -> web.Response:
        parts = []
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            data = await part.read()
            parts.append({"name": part.name, "filename": part.filename, "size": len(data),
                          "type": part.headers.get("Content-Type"),
                          "json": json.loads(data) if part.filename is None else None})
        return web.json_response(parts)

    async def store(request: web.Request) -> web.Response:
        seen["store_type"] = request.content_type
        seen["store_disposition"] = request.headers.get("Content-Disposition")
        return web.json_response(len(await request.read()))

    async def report(_: web.Request) -> web.StreamResponse:
        return web.Response(body=b"a,b\n1,2\n", content_type="text/csv", headers={
            "Content-Disposition": 'attachment; filename="report.csv"'})

    async def picture(_: web.Request) -> web.Response:
        return web.Response(body=png_bytes(9), content_type="image/png")

    async def both(_: web.Request) -> web.Response:
        writer = MultipartWriter("form-data")
        part = writer.append(png_bytes(200), {"Content-Type": "image/png"})
        part.set_content_disposition("form-data", name="image", filename="image.png")
        part = writer.append(dumps_npy(np.eye(2, dtype=np.float32)), {"Content-Type": NPY})
        part.set_content_disposition("form-data", name="mask", filename="mask.npy")
        part = writer.append(b'"ok"', {"Content-Type": "application/json"})
        part.set_content_disposition("form-data", name="label")
        return web.Response(body=writer)

    application = web.Application()
    application["seen"] = seen
    application.router.add_get("/schema.json", schema)
    for name, handler in (("scale", scale), ("total", total), ("upload", upload),
                          ("store", store), ("report", report), ("picture", picture),
                          ("both", both)):
        application.router.add_post(f"/{name}", handler)
    return application


async def serving() -> AsyncIterator[tuple[str, dict]]:
    application = app()
    runner = web.AppRunner(application)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", application["seen"]
    finally:
        await runner.cleanup()


def run(test) -> None:
    async def main() -> None:
        agen = serving()
        url, seen = await anext(agen)
        try:
            async with tensorwire.AsyncClient(url) as client:
                await test(client, seen)
        finally:
            await agen.aclose()

    asyncio.run(main())


def test_tensor_outputs_are_asked_for_as_npy_and_inputs_sent_as_lists():
    async def check(client, seen):
        out = await client.scale(x=np.array([[1, 2]], np.float32), k=2)
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
        assert out.tolist() == [[2.0, 4.0]]
        assert seen["scale_accept"].startswith(NPY)

    run(check)


def test_a_root_tensor_is_an_npy_body():
    async def check(client, seen):
        assert await client.total(np.arange(10, dtype=np.float32)) == 45.0

    run(check)


def test_files_are_multipart_parts_and_other_fields_json_parts(tmp_path):
    pytest.importorskip("PIL")
    from PIL import Image

    doc = tmp_path / "doc.pdf"
    doc.write_bytes(b"%PDF-1.7 ...")

    async def check(client, seen):
        parts = await client.upload(file=doc, pages=[b"one", Image.new("RGB", (1, 1))],
                                    meta={"x": np.ones(2)})
        by = [(p["name"], p["filename"], p["type"]) for p in parts]
        assert by == [("file", "doc.pdf", "application/pdf"),
                      ("pages", "file", "application/octet-stream"),
                      ("pages", "image.png", "image/png"),
                      ("meta", None, "application/json")]
        assert parts[0]["size"] == 12 and parts[3]["json"] == {"x": [1.0, 1.0]}

    run(check)


def test_a_root_file_is_the_raw_body_with_its_type_and_name(tmp_path):
    src = tmp_path / "clip.mp3"
    src.write_bytes(b"ID3" + b"\x00" * 100)

    async def check(client, seen):
        assert await client.store(src) == 103
        assert seen["store_type"] == "audio/mpeg"
        assert 'filename="clip.mp3"' in seen["store_disposition"]
        with open(src, "rb") as f:
            assert await client.store(f) == 103

    run(check)


def test_file_outputs_are_paths_and_images_are_pil(tmp_path):
    pytest.importorskip("PIL")

    async def check(client, seen):
        path = await client.report()
        assert path.name == "report.csv" and path.read_text() == "a,b\n1,2\n"
        image = await client.picture()
        assert image.size == (3, 2) and image.getpixel((0, 0)) == 9

    run(check)


def test_a_multipart_response_is_one_value_per_field():
    pytest.importorskip("PIL")

    async def check(client, seen):
        out = await client.both()
        assert set(out) == {"image", "mask", "label"}
        assert out["image"].getpixel((2, 1)) == 200
        assert out["mask"].tolist() == [[1.0, 0.0], [0.0, 1.0]]
        assert out["label"] == "ok"

    run(check)
