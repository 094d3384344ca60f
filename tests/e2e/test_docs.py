"""/docs with auth and behind a path prefix: what Swagger UI needs to load and call."""

from __future__ import annotations

import json

from examples.quickstart import Quickstart
from tests.support.http_calls import get, post
from tests.support.servers import serving

TOKEN = "docs-token"


def test_with_auth_the_docs_load_and_declare_the_bearer_scheme():
    with serving(Quickstart, auth_token=TOKEN) as server:
        url = server.http_url
        page = get(url + "/docs")
        assert page.status == 200 and "swagger-ui" in page.text
        assert get(url + "/docs/static/swagger-ui.css").status == 200
        doc = get(url + "/docs.json")
        assert doc.status == 200
        document = doc.json()
        assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
        assert document["security"] == [{"bearerAuth": []}]
        # the APIs and the client contract still need the token
        assert post(url + "/summarize", {"text": "a"}).status == 401
        assert get(url + "/schema.json").status == 401
        ok = post(url + "/summarize", {"text": "a"},
                  headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status == 200


def test_docs_can_be_closed_with_the_rest():
    with serving(Quickstart, auth_token=TOKEN, auth_open_docs=False) as server:
        assert get(server.http_url + "/docs").status == 401
        assert get(server.http_url + "/docs.json").status == 401


def test_behind_a_path_prefix_the_docs_link_relatively_and_name_the_prefix():
    with serving(Quickstart, root_path="/models/quick") as server:
        page = get(server.http_url + "/docs").text
        assert 'src="docs/static/swagger-ui-bundle.js"' in page
        assert 'url: "docs.json"' in page
        assert '"/docs' not in page  # no absolute link that a prefix would break
        document = json.loads(get(server.http_url + "/docs.json").body)
        assert document["servers"] == [{"url": "/models/quick"}]
