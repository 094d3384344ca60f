"""/docs with auth and behind a path prefix: what Swagger UI needs to load and call."""

from __future__ import annotations

import json

import pytest

import tensorwire
from examples.quickstart import Quickstart
from tensorwire.errors import Unauthenticated
from tests.support.http_calls import get, post
from tests.support.servers import serving

TOKEN = "docs-token"
GOOD = {"Authorization": f"Bearer {TOKEN}"}


def test_with_auth_the_page_loads_and_the_contract_needs_the_token():
    with serving(Quickstart, auth_token=TOKEN) as server:
        url = server.http_url
        page = get(url + "/docs")
        assert page.status == 200 and "swagger-ui" in page.text
        assert 'id="tw-token"' in page.text  # where it asks for the token
        assert get(url + "/docs/static/swagger-ui.css").status == 200
        # the documents that map every API need the token (issue 32)
        for path in ("/docs.json", "/schema.json"):
            closed = get(url + path)
            assert closed.status == 401 and closed.json()["error"], path
            assert "summarize" not in closed.text
        doc = get(url + "/docs.json", headers=GOOD)
        assert doc.status == 200
        document = doc.json()
        assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
        assert document["security"] == [{"bearerAuth": []}]
        assert get(url + "/schema.json", headers=GOOD).status == 200
        # and so do the APIs
        assert post(url + "/summarize", {"text": "a"}).status == 401
        assert post(url + "/summarize", {"text": "a"}, headers=GOOD).status == 200


def test_the_option_opens_the_contract_documents_but_no_api():
    with serving(Quickstart, auth_token=TOKEN, auth_open_docs=True) as server:
        url = server.http_url
        assert get(url + "/docs").status == 200
        assert get(url + "/docs.json").status == 200
        assert get(url + "/schema.json").status == 200
        assert post(url + "/summarize", {"text": "a"}).status == 401


def test_the_client_sends_its_token_to_discover_the_apis():
    with serving(Quickstart, auth_token=TOKEN) as server:
        with tensorwire.SyncClient(server.http_url, token=TOKEN) as client:
            assert client.summarize(text="a b", max_words=1) == {"summary": "a", "words": 2}
        with pytest.raises(Unauthenticated), tensorwire.SyncClient(server.http_url):
            pass


def test_behind_a_path_prefix_the_docs_link_relatively_and_name_the_prefix():
    with serving(Quickstart, root_path="/models/quick") as server:
        page = get(server.http_url + "/docs").text
        assert 'src="docs/static/swagger-ui-bundle.js"' in page
        assert 'url: "docs.json"' in page
        assert '"/docs' not in page  # no absolute link that a prefix would break
        document = json.loads(get(server.http_url + "/docs.json").body)
        assert document["servers"] == [{"url": "/models/quick"}]
