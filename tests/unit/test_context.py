"""Context pieces the transports build per request: lazy, but with the same answers."""

from __future__ import annotations

import threading

from tensorwire.context import Context, Headers, RequestInfo


def test_headers_are_case_insensitive_first_value_wins_and_decode_bytes() -> None:
    h = Headers([("X-Trace", "a"), ("x-trace", "b"), ("Auth", b"t\xe9")])
    assert h["x-TRACE"] == "a"
    assert h["auth"] == "t\xe9"
    assert sorted(h) == ["auth", "x-trace"]
    assert len(h) == 2


def test_headers_from_a_function_are_read_once_and_only_when_asked() -> None:
    calls = []

    def source() -> list[tuple[str, str]]:
        calls.append(1)
        return [("A", "1")]

    h = Headers(source)
    assert calls == []
    assert h.get("a") == "1"
    assert dict(h) == {"a": "1"}
    assert calls == [1]


def test_request_id_comes_from_the_header_else_is_made_once() -> None:
    given = RequestInfo("http", "api", Headers({"X-Request-ID": "abc"}))
    assert given.id == "abc"
    made = RequestInfo("grpc", "api", Headers([]))
    assert len(made.id) == 16 and made.id == made.id
    assert int(made.id, 16) >= 0
    explicit = RequestInfo("http", "api", Headers({"X-Request-ID": "abc"}), request_id="x")
    assert explicit.id == "x"


def test_peer_may_be_resolved_lazily() -> None:
    calls = []

    def peer() -> str:
        calls.append(1)
        return "ipv4:127.0.0.1:1"

    info = RequestInfo("grpc", "api", Headers([]), peer)
    assert calls == []
    assert info.peer == info.peer == "ipv4:127.0.0.1:1"
    assert calls == [1]
    assert RequestInfo("http", "api", Headers([]), "10.0.0.1").peer == "10.0.0.1"


def test_cancel_is_seen_from_another_thread() -> None:
    ctx = Context(RequestInfo("http", "api", Headers([])))
    seen = []
    assert not ctx.cancelled
    ctx.cancel()
    t = threading.Thread(target=lambda: seen.append(ctx.cancelled))
    t.start()
    t.join()
    assert seen == [True]
