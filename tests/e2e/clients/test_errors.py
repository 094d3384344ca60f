"""Error parity: the same bad call raises the same class with the same field locations
through both clients and both protocols; failures to reach the server are their own."""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

import tensorwire
from examples.constrained import TextGenerator
from examples.llm_stream import LanguageModel
from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from tensorwire.errors import (
    ClientTimeout,
    DeadlineExceeded,
    InternalError,
    InvalidArgument,
    NotFound,
    Overloaded,
    ServerUnreachable,
    TensorwireError,
)
from tests.support.ops_service import Ops
from tests.support.servers import free_port, free_ports, serving, start_in_thread, url_of

from .services import Kitchen

_keys = itertools.count()


@dataclass
class Bad:
    id: str
    service: type
    api: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    args: tuple[Any, ...] = ()
    error: type[TensorwireError] = InvalidArgument
    locs: list[list[str | int]] = field(default_factory=list)


BAD = [
    Bad("missing-required", Quickstart, "summarize", {}, locs=[["text"]]),
    Bad("constraint", Quickstart, "summarize", {"text": "x", "max_words": 101},
        locs=[["max_words"]]),
    Bad("not-an-int", Quickstart, "summarize", {"text": "x", "max_words": "many"},
        locs=[["max_words"]]),
    Bad("fractional-int", Quickstart, "summarize", {"text": "x", "max_words": 2.5},
        locs=[["max_words"]]),
    Bad("not-a-string", Quickstart, "summarize", {"text": 5}, locs=[["text"]]),
    Bad("two-errors", Quickstart, "summarize", {"text": ["x"], "max_words": "many"},
        locs=[["text"], ["max_words"]]),
    Bad("temperature", TextGenerator, "complete", {"prompt": "hi", "temperature": 2.0},
        locs=[["temperature"]]),
    Bad("multiple-of", TextGenerator, "complete", {"prompt": "hi", "max_tokens": 150},
        locs=[["max_tokens"]]),
    Bad("too-long", TextGenerator, "complete", {"prompt": "x" * 1001}, locs=[["prompt"]]),
    Bad("nested-fields", ReviewAnalyzer, "analyze", {"params": {"text": "", "stars": 9}},
        locs=[["params", "text"], ["params", "stars"]]),
    Bad("nested-missing", ReviewAnalyzer, "analyze", {"params": {"text": "x"}},
        locs=[["params", "stars"]]),
    Bad("nested-type", ReviewAnalyzer, "analyze", {"params": {"text": "x", "stars": "lots"}},
        locs=[["params", "stars"]]),
    Bad("model-not-object", ReviewAnalyzer, "analyze", {"params": "nope"}, locs=[["params"]]),
    Bad("list-not-list", ReviewAnalyzer, "analyze",
        {"params": {"text": "x", "stars": 3, "tags": "a"}}, locs=[["params", "tags"]]),
    Bad("input-spec-field", ReviewAnalyzer, "search", {"query": "", "top_k": 50},
        locs=[["query"], ["top_k"]]),
    Bad("literal", ReviewAnalyzer, "search", {"query": "x", "mode": "nope"},
        locs=[["mode"]]),
    Bad("raised-in-method", ReviewAnalyzer, "stats", args=([],), locs=[["values"]]),
    Bad("root-items", ReviewAnalyzer, "stats", args=([1, "a"],), locs=[["values", 1]]),
    Bad("user-exception", ReviewAnalyzer, "fail", {"message": "x"}, error=InternalError),
    Bad("stream-before-first", LanguageModel, "generate", {"max_tokens": 0},
        locs=[["max_tokens"]]),
    Bad("stream-mid-way", Kitchen, "words", {"n": 3, "fail_at": 1}, locs=[["fail_at"]]),
    Bad("list-item", Kitchen, "report", {"items": [{"name": "a", "qty": -1}]},
        locs=[["items", 0, "qty"]]),
    Bad("datetime", Kitchen, "shift", {"when": "not a date", "by": 1}, locs=[["when"]]),
    Bad("enum", Kitchen, "report", {"items": [], "color": "blue"}, locs=[["color"]]),
    Bad("overloaded", Kitchen, "busy", {"fail_times": 5}, error=Overloaded),
]


def _run(client: Any, case: Bad) -> Any:
    result = getattr(client, case.api)(*case.args, **case.kwargs)
    info = next(a for a in client.list_apis() if a.name == case.api)
    return list(result) if info.stream else result


async def _arun(client: Any, case: Bad) -> Any:
    result = getattr(client, case.api)(*case.args, **case.kwargs)
    info = next(a for a in client.list_apis() if a.name == case.api)
    if info.stream:
        return [chunk async for chunk in result]
    return await result


def _kwargs(case: Bad) -> dict[str, Any]:
    if case.api == "busy":  # a fresh key per call: the first calls are refused
        return {**case.kwargs, "key": f"k{next(_keys)}"}
    return case.kwargs


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_same_error_class_and_locations(servers, case: Bad, protocol: str, client_kind: str):
    url = url_of(servers[case.service], protocol)
    case = Bad(**{**case.__dict__, "kwargs": _kwargs(case)})
    if client_kind == "sync":
        with tensorwire.SyncClient(url) as client, pytest.raises(TensorwireError) as info:
            _run(client, case)
    else:
        async def main() -> None:
            async with tensorwire.AsyncClient(url) as client:
                await _arun(client, case)

        with pytest.raises(TensorwireError) as info:
            asyncio.run(main())
    err = info.value
    assert type(err) is case.error, repr(err)
    assert [v["loc"] for v in err.detail] == case.locs
    assert err.message
    if case.error is InternalError:
        assert "secret" not in err.message  # nothing leaks from the method


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_messages_match_across_protocols(servers, protocol):
    """Not only the class and locations: the server's own words come back."""
    url = url_of(servers[Quickstart], protocol)
    with tensorwire.SyncClient(url) as client, pytest.raises(InvalidArgument) as info:
        client.summarize(text="x", max_words=0)
    assert info.value.detail == [{"loc": ["max_words"], "type": "greater_than_equal",
                                  "msg": "Input should be greater than or equal to 1"}]
    assert info.value.message == "max_words: Input should be greater than or equal to 1"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_stream_errors_keep_chunks_before_them(servers, protocol):
    with tensorwire.SyncClient(url_of(servers[Kitchen], protocol)) as client:
        chunks = []
        with pytest.raises(InvalidArgument) as info:
            for chunk in client.words(n=4, fail_at=2):
                chunks.append(chunk)
    assert chunks == ["w0", "w1"]
    assert info.value.detail[0]["loc"] == ["fail_at"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_call_mistakes_are_type_errors_before_any_request(servers, protocol):
    with tensorwire.SyncClient(url_of(servers[Quickstart], protocol)) as client:
        with pytest.raises(TypeError, match=r"unexpected input 'txt'.*text, max_words"):
            client.summarize(txt="x")
        with pytest.raises(TypeError, match="at most 2 positional"):
            client.summarize("a", 1, 2)
        with pytest.raises(TypeError, match="'text' twice"):
            client.summarize("a", text="b")
        with pytest.raises(NotFound, match="no API 'nope'"):
            client.call("nope")
        with pytest.raises(AttributeError, match="has no API 'nope'"):
            client.nope  # noqa: B018


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_root_input_is_positional_only(servers, protocol):
    """Both contracts say which APIs take a root input (HTTP: /schema.json; gRPC: the
    rpc's `option (tensorwire.v1.root_input) = true;`, read through reflection)."""
    with tensorwire.SyncClient(url_of(servers[Quickstart], protocol)) as client:
        with pytest.raises(TypeError, match=r"root input 'text'.*positional.*upper\(value\)"):
            client.upper(text="abc")
        with pytest.raises(TypeError, match="one root input"):
            client.upper("a", "b")
        assert client.upper("abc") == "ABC"
        info = {a.name: a for a in client.list_apis()}
        assert info["upper"].root_input is True
        assert info["count"].root_input is True
        assert info["spell"].root_input is False  # one keyword input, not a root input
        assert info["summarize"].root_input is False


# ---------------------------------------------------------------------- reaching it


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_connection_refused_is_server_unreachable(protocol):
    port = free_port()
    url = f"http://127.0.0.1:{port}" if protocol == "http" else f"grpc://127.0.0.1:{port}"
    start = time.monotonic()
    with pytest.raises(ServerUnreachable, match=f"127.0.0.1:{port}"):
        tensorwire.SyncClient(url, connect_timeout=3)
    assert time.monotonic() - start < 10

    async def main() -> None:
        await tensorwire.AsyncClient.connect(url, connect_timeout=3)

    with pytest.raises(ServerUnreachable):
        asyncio.run(main())


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_server_gone_after_connect_is_server_unreachable(protocol):
    server = start_in_thread(Quickstart)
    client = tensorwire.SyncClient(url_of(server, protocol))
    try:
        assert client.upper("a") == "A"
        server.stop()
        with pytest.raises(ServerUnreachable):
            client.upper("a")
        assert client.is_ready() is False
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_timeouts_are_client_timeouts(servers, protocol):
    url = url_of(servers[Kitchen], protocol)
    with tensorwire.SyncClient(url, timeout=0.3) as client:
        with pytest.raises(ClientTimeout):
            client.slow(seconds=2)
        assert client.slow(seconds=0) == "done"
        # A per-call view: more time for one call, the client itself unchanged.
        assert client.with_options(timeout=5).slow(seconds=0.5) == "done"
        with pytest.raises(ClientTimeout):
            client.slow(seconds=1)


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_server_time_limit_is_deadline_exceeded_not_a_client_timeout(protocol, client_kind):
    """The server's own --request-timeout fires before the client's timeout: that is the
    server's DeadlineExceeded on both protocols, even though over gRPC the client's
    deadline travels with the call; only the client's own deadline is a ClientTimeout."""
    errors: list[TensorwireError] = []
    with serving(Ops, request_timeout=0.3) as server:
        url = url_of(server, protocol)
        if client_kind == "sync":
            with tensorwire.SyncClient(url, timeout=10) as client:
                for call in (lambda: client.sleep(seconds=3),
                             lambda: list(client.tick(n=2, delay=3))):
                    with pytest.raises(TensorwireError) as info:
                        call()
                    errors.append(info.value)
                with pytest.raises(ClientTimeout):  # the client's deadline, shorter
                    client.with_options(timeout=0.1).sleep(seconds=3)
        else:
            async def main() -> None:
                async with tensorwire.AsyncClient(url, timeout=10) as client:
                    for call in (lambda: client.sleep(seconds=3),
                                 lambda: _collect(client.tick(n=2, delay=3))):
                        with pytest.raises(TensorwireError) as info:
                            await call()
                        errors.append(info.value)
                    with pytest.raises(ClientTimeout):
                        await client.with_options(timeout=0.1).sleep(seconds=3)

            asyncio.run(main())
    assert len(errors) == 2  # a unary call and a stream
    for err in errors:
        assert type(err) is DeadlineExceeded, repr(err)
        assert "did not complete within 0.3 s" in err.message


async def _collect(chunks: Any) -> list[Any]:
    return [chunk async for chunk in chunks]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_retries_are_off_by_default_and_retry_overloaded(servers, protocol):
    url = url_of(servers[Kitchen], protocol)
    with tensorwire.SyncClient(url) as client, pytest.raises(Overloaded):
        client.busy(key=f"a{protocol}", fail_times=1)
    with tensorwire.SyncClient(url, retries=3, backoff=0.01) as client:
        assert client.busy(key=f"b{protocol}", fail_times=2) == 3  # third attempt wins
        with pytest.raises(Overloaded):
            client.busy(key=f"c{protocol}", fail_times=5)  # retries run out
        with pytest.raises(InvalidArgument):  # a client error is never retried
            client.busy(key=f"d{protocol}", fail_times=20)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_retries_wait_for_a_server_that_comes_up(protocol):
    """Connection refused is retried with back-off: a client started before its server."""
    import threading

    from tests.support.servers import RunningServer

    port, grpc_port = free_ports(2)
    box: dict[str, RunningServer] = {}

    def later() -> None:
        time.sleep(0.5)
        box["server"] = start_in_thread(Quickstart, http_port=port, grpc_port=grpc_port)

    thread = threading.Thread(target=later)
    thread.start()
    url = f"http://127.0.0.1:{port}" if protocol == "http" else f"grpc://127.0.0.1:{grpc_port}"
    try:
        with tensorwire.SyncClient(url, retries=8, backoff=0.2, connect_timeout=1) as client:
            assert client.upper("late") == "LATE"
    finally:
        thread.join()
        if "server" in box:
            box["server"].stop()
