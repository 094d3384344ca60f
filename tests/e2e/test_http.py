"""HTTP transport: routes, media types, limits, errors, docs, health, SSE timing."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import aiohttp
import pytest
from pydantic import BaseModel, ConfigDict

import tensorwire
from examples.constrained import TextGenerator
from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from tests.e2e.services import EVENTS, Probe
from tests.support.http_calls import get, post, sse_events
from tests.support.servers import serving
from tests.support.uploads import call, field, file


def test_unknown_route_is_404_json(servers):
    reply = post(servers[Quickstart].http_url + "/nope", {})
    assert reply.status == 404
    assert reply.json()["error"]


def test_wrong_method_is_405_json_with_allow(servers):
    reply = get(servers[Quickstart].http_url + "/summarize")
    assert reply.status == 405
    assert reply.json()["error"]
    assert "POST" in reply.headers["allow"]


def test_router_errors_on_any_path_and_method_are_json(servers):
    url = servers[Quickstart].http_url
    deep = get(url + "/no/such/deep/path")
    assert deep.status == 404 and deep.json()["error"]
    docs = post(url + "/docs", {})
    assert docs.status == 405 and "GET" in docs.headers["allow"]
    assert docs.json()["error"]
    asset = get(url + "/docs/static/nope.js")
    assert asset.status == 404 and asset.json()["error"]


@pytest.mark.parametrize(("body", "fragment"), [
    (b"{not json", "json"),
    (b"[1, 2]", "object"),
    (b'{"text": "a", "bogus": 1}', "Extra inputs"),
    (b'{"text": 5}', "string"),
])
def test_malformed_or_mistyped_json_is_400_with_detail(servers, body, fragment):
    reply = post(servers[Quickstart].http_url + "/summarize", body)
    assert reply.status == 400
    payload = reply.json()
    assert fragment.lower() in json.dumps(payload).lower()
    assert payload["detail"][0]["loc"] is not None


def test_extra_field_names_its_location(servers):
    reply = post(servers[Quickstart].http_url + "/summarize", {"text": "a", "bogus": 1})
    assert reply.error_locs() == [["bogus"]]


class Meta(BaseModel):
    """A user's model, `extra` left unset (pydantic would drop unknown fields)."""

    tags: list[str] = []


class LooseMeta(BaseModel):
    model_config = ConfigDict(extra="allow")
    tags: list[str] = []


@tensorwire.service
class Labelled:
    @tensorwire.api
    def label(self, doc: Path, meta: Meta, loose: LooseMeta | None = None) -> dict:
        return {"tags": meta.tags, "extra": loose.model_extra if loose else None}


@pytest.mark.parametrize(("route", "body", "loc"), [
    ("/search", {"query": "red", "topk": 1}, ["topk"]),  # input_spec's top level
    ("/analyze", {"params": {"text": "ok", "stars": 4, "tag": ["a"]}}, ["params", "tag"]),
    ("/analyze", {"params": {"text": "ok", "stars": 4}, "param": 1}, ["param"]),
])
def test_unknown_json_fields_are_400_naming_them(servers, route, body, loc):
    reply = post(servers[ReviewAnalyzer].http_url + route, body)
    assert reply.status == 400, reply.text
    assert reply.json()["detail"] == [
        {"loc": loc, "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}]
    assert reply.json()["request_id"] == reply.headers["x-request-id"]


def test_unknown_fields_in_a_multipart_json_part_are_400_unless_the_model_allows(servers):
    server = servers[Labelled]
    doc = file("doc", b"text", "a.txt")
    reply = call("aiohttp", server, "label", [doc, field("meta", {"tag": ["a"]})])
    assert reply.status == 400 and reply.locs == [["meta", "tag"]], reply
    reply = call("aiohttp", server, "label", [doc, field("meta", {"tags": ["a"]}),
                                              field("loose", {"tags": [], "z": 1})])
    assert reply.value == {"tags": ["a"], "extra": {"z": 1}}, reply
    reply = call("grpc", server, "label", [doc, field("meta", {"tags": ["a"]})])
    assert reply.value == {"tags": ["a"], "extra": None}, reply


def test_wrong_media_type_is_415(servers):
    reply = post(servers[Quickstart].http_url + "/summarize", b"\x89PNG",
                 content_type="image/png")
    assert reply.status == 415
    assert "application/json" in reply.json()["error"]
    reply = post(servers[Quickstart].http_url + "/upper", b"{}", content_type="image/png")
    assert reply.status == 415


def test_curl_style_form_encoded_json_is_accepted(servers):
    reply = post(servers[Quickstart].http_url + "/summarize", {"text": "a b c", "max_words": 1},
                 content_type="application/x-www-form-urlencoded")
    assert reply.status == 200
    assert reply.json() == {"summary": "a", "words": 3}


def test_root_text_body_and_bad_utf8(servers):
    url = servers[Quickstart].http_url + "/upper"
    assert post(url, "grüß".encode(), content_type="text/plain; charset=utf-8").text == "GRÜSS"
    assert post(url, b'"json string"', content_type="application/json").text == "JSON STRING"
    reply = post(url, b"\xff\xfe", content_type="text/plain")
    assert reply.status == 400
    assert reply.error_locs() == [["text"]]


def test_root_json_array_and_empty_body(servers):
    url = servers[ReviewAnalyzer].http_url + "/stats"
    assert post(url, b"[2, 4]").json() == {"min": 2.0, "max": 4.0, "mean": 3.0}
    empty = post(url, b"")
    assert empty.status == 400
    assert empty.error_locs() == [["values"]]
    bad = post(url, b'[1, "x"]')
    assert bad.status == 400
    assert bad.error_locs() == [["values", 1]]


def test_user_exception_is_500_without_traceback_and_server_keeps_serving(servers):
    url = servers[ReviewAnalyzer].http_url
    reply = post(url + "/fail", {"message": "s3cr3t"})
    assert reply.status == 500
    assert reply.json()["error"] == "Internal server error"
    assert "s3cr3t" not in reply.text and "Traceback" not in reply.text
    assert reply.json()["request_id"] == reply.headers["x-request-id"]
    assert post(url + "/shout", b"ok", content_type="text/plain").text == "OK"


def test_body_larger_than_the_limit_is_413():
    with serving(Probe, max_request_size=1024) as server:
        ok = post(server.http_url + "/echo_bytes", {"data": "AAAA"})
        assert ok.status == 200 and ok.json() == 3
        big = post(server.http_url + "/echo_bytes", {"data": "A" * 4000})
        assert big.status == 413
        assert big.json()["error"]
        assert get(server.http_url + "/readyz").status == 200


def test_chunked_body_larger_than_the_limit_is_413_not_500():
    """No Content-Length: the limit is hit while reading (aiohttp's own 413)."""
    with serving(Probe, max_request_size=1024) as server:
        req = urllib.request.Request(
            server.http_url + "/echo_bytes", data=iter([b'{"data": "', b"A" * 4000, b'"}']),
            headers={"Content-Type": "application/json"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 413
        body = json.loads(err.value.read())
        assert body["error"] and body["request_id"]
        assert get(server.http_url + "/readyz").status == 200


def test_bytes_are_base64_in_json(servers):
    reply = post(servers[Probe].http_url + "/echo_bytes", {"data": "aGVsbG8="})
    assert reply.json() == 5


def test_context_sets_status_and_headers_and_sees_request_headers(servers):
    reply = post(servers[Probe].http_url + "/headers", {"status": 201},
                 headers={"X-Custom": "abc"})
    assert reply.status == 201
    assert reply.headers["x-probe"] == "yes"
    assert reply.json() == {"protocol": "http", "x-custom": "abc", "api": "headers"}


def test_contract_endpoints(servers):
    url = servers[TextGenerator].http_url
    docs = get(url + "/docs")
    assert docs.status == 200 and "swagger-ui-bundle.js" in docs.text
    assert "cdn" not in docs.text.lower()
    bundle = get(url + "/docs/static/swagger-ui-bundle.js")
    assert bundle.status == 200 and len(bundle.body) > 100_000
    assert get(url + "/docs/static/../../etc/passwd").status == 404
    openapi = get(url + "/docs.json").json()
    assert openapi["openapi"] == "3.1.0" and "/complete" in openapi["paths"]
    schema = get(url + "/schema.json").json()
    assert schema["routes"][0]["name"] == "complete"
    for probe in ("/livez", "/readyz", "/healthz"):
        assert get(url + probe).status == 200


async def test_sse_first_event_arrives_before_the_last_is_produced(servers):
    server = servers[Probe]
    tag = f"sse-{time.monotonic()}"
    async with aiohttp.ClientSession() as session, session.post(
        server.http_url + "/ticks", json={"n": 3, "delay": 0.3, "tag": tag}
    ) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        first = await resp.content.readuntil(b"\n\n")
        seen_at = time.monotonic()
        assert first == b"data: tick 0\n\n"
        rest = await resp.read()
    last_produced = max(t for g, i, t in EVENTS["produced"] if g == tag)
    assert seen_at < last_produced
    assert [d for _, d in sse_events(rest)] == ["tick 1", "tick 2"]


@pytest.mark.parametrize("api", ["ticks", "sync_ticks"])
async def test_client_leaving_mid_stream_closes_the_generator(servers, api):
    server = servers[Probe]
    tag = f"leave-{api}-{time.monotonic()}"
    async with aiohttp.ClientSession() as session:
        resp = await session.post(server.http_url + f"/{api}",
                                  json={"n": 1000, "delay": 0.02, "tag": tag})
        await resp.content.readuntil(b"\n\n")
        resp.close()
    for _ in range(200):
        if tag in EVENTS["closed"]:
            break
        await asyncio.sleep(0.02)
    assert tag in EVENTS["closed"]
    produced = [i for g, i, _ in EVENTS["produced"] if g == tag]
    assert len(produced) < 1000


curl = shutil.which("curl")


@pytest.mark.skipif(curl is None, reason="curl not installed")
def test_curl_json_root_and_stream(servers):
    url = servers[Quickstart].http_url
    out = subprocess.run([curl, "-s", "-X", "POST", url + "/summarize",
                          "-H", "Content-Type: application/json",
                          "-d", '{"text": "one two three", "max_words": 2}'],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {"summary": "one two", "words": 3}
    out = subprocess.run([curl, "-s", "-d", "shout", url + "/upper"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "SHOUT"
    out = subprocess.run([curl, "-s", "-N", "-d", '{"word": "abc"}', url + "/spell"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "data: a\n\ndata: b\n\ndata: c\n\n"
    out = subprocess.run([curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-d",
                          '{"text": 1}', url + "/summarize"],
                         capture_output=True, text=True, check=True).stdout
    assert out == "400"
