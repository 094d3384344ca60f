"""`tensorwire.http.docs`: the Swagger UI page (escaped title, relative links, the bearer
scheme it hands the token to) and its packaged assets, served from an allow-list."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer, make_mocked_request

from tensorwire.http.docs import docs_asset, docs_page, static_dir
from tensorwire.http.schema import BEARER

ASSETS = {"swagger-ui-bundle.js": "application/javascript", "swagger-ui.css": "text/css",
          "favicon-32x32.png": "image/png"}


def test_the_page_is_html_with_the_service_s_name_escaped() -> None:
    page = docs_page("Shop <script>alert(1)</script> & co")
    assert page.content_type == "text/html"
    text = page.text or ""
    assert "<title>Shop &lt;script&gt;alert(1)&lt;/script&gt; &amp; co - API docs</title>" in text
    assert "<h2>Shop &lt;script&gt;alert(1)&lt;/script&gt; &amp; co</h2>" in text
    assert "<script>alert(1)" not in text


def test_the_page_links_relatively_and_names_the_bearer_scheme() -> None:
    text = docs_page("Quick").text or ""
    assert 'href="docs/static/swagger-ui.css"' in text
    assert 'src="docs/static/swagger-ui-bundle.js"' in text
    assert 'fetch("docs.json"' in text and 'url: "docs.json"' in text
    assert '"/docs' not in text  # an absolute link would break behind a path prefix
    assert f"SCHEME = {json.dumps(BEARER)};" in text
    assert "{" + "title}" not in text and "{{" not in text  # every placeholder filled


def test_every_listed_asset_is_packaged() -> None:
    for name in ASSETS:
        assert (static_dir() / name).stat().st_size > 0, name


@pytest.fixture
async def client() -> AsyncIterator[TestClient]:
    app = web.Application()
    app.router.add_get("/docs/static/{name}", docs_asset)
    async with TestClient(TestServer(app)) as client:
        yield client


@pytest.mark.parametrize(("name", "media"), ASSETS.items())
async def test_an_asset_is_served_with_its_type_and_cached(client: TestClient, name: str,
                                                           media: str) -> None:
    response = await client.get(f"/docs/static/{name}")
    assert response.status == 200
    assert response.headers["Content-Type"] == media
    assert response.headers["Cache-Control"] == "public, max-age=86400"
    assert await response.read() == (static_dir() / name).read_bytes()


@pytest.mark.parametrize("name", ["LICENSE", "VERSION", "NOTICE", "missing.js"])
async def test_a_file_off_the_list_is_not_served(client: TestClient, name: str) -> None:
    assert (await client.get(f"/docs/static/{name}")).status == 404


async def test_a_name_that_climbs_out_is_not_served() -> None:
    request = make_mocked_request("GET", "/docs/static/x",
                                  match_info={"name": "../docs.py"})
    with pytest.raises(web.HTTPNotFound):
        await docs_asset(request)
