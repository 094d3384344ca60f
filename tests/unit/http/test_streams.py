"""Stream framing: server-sent events, or BentoML's one-item-per-chunk for its client."""

from __future__ import annotations

from tensorwire.http.streams import SSE, framing_for


def test_events_by_default_and_for_clients_that_ask_for_them():
    assert framing_for({}, "text/plain") is SSE
    assert framing_for({"User-Agent": "curl/8.5.0", "Accept": "*/*"}, "text/plain") is SSE
    bento_asking = {"User-Agent": "BentoML HTTP Client/1.4.40", "Accept": "text/event-stream"}
    assert framing_for(bento_asking, "text/plain") is SSE
    assert SSE.item(b"hi") == b"data: hi\n\n"
    assert SSE.error is not None and SSE.error(b"{}").startswith(b"event: error\n")


def test_bentomls_client_gets_each_item_as_it_is():
    framing = framing_for({"User-Agent": "BentoML HTTP Client/1.4.40"}, "text/plain")
    assert framing.item(b"hi ") == b"hi "
    assert framing.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert framing.error is None  # BentoML's framing has no error frame: the stream ends
    as_json = framing_for({"User-Agent": "BentoML HTTP Client/1.4.40"}, "application/json")
    assert as_json.headers["Content-Type"] == "application/json"
