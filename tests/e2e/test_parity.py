"""One table of cases, driven over HTTP (JSON / root bodies) and gRPC alike.

Every example service of the spine answers the same inputs with the same results on
both protocols and rejects the same bad inputs with the same field locations.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Annotated, Any

import grpc
import pytest
from annotated_types import Len
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

import tensorwire
from examples.constrained import TextGenerator
from examples.llm_stream import LanguageModel
from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from tests.support.grpc_calls import GrpcCaller, error_locs
from tests.support.http_calls import post, sse_events

GRPC_CODE = {400: grpc.StatusCode.INVALID_ARGUMENT, 500: grpc.StatusCode.INTERNAL}


@dataclass
class Case:
    id: str
    service: type
    api: str
    inputs: dict[str, Any]
    expect: Any = None
    status: int = 200
    locs: list[list[str | int]] = field(default_factory=list)



class Options(BaseModel):
    tags: list[str] = ["default"]
    weights: dict[str, float] = {"w": 1.0}
    need: list[int]


class Got(BaseModel):
    tags: list[str]
    b: list[int]
    opts: dict[str, int]
    x: int


@tensorwire.service
class ContainerDefaults:
    """List and dict inputs with defaults: an empty repeated/map field reads as absent."""

    @tensorwire.api
    def defaults(self, tags: list[str] = ["default"],  # noqa: B006
                 b: Annotated[list[int], Len(1, 2)] = [1],  # noqa: B006
                 opts: dict[str, int] = {"k": 1}, x: int = 0) -> Got:  # noqa: B006
        return Got(tags=tags, b=b, opts=opts, x=x)

    @tensorwire.api
    def count(self, items: list[int], x: int = 0) -> int:
        return len(items)

    @tensorwire.api
    def nested(self, params: Options) -> Options:
        return params


LONG = "x" * 1001
CASES = [
    # constraint-validated generation: each rule accepted and rejected
    Case("complete-ok", TextGenerator, "complete",
         {"prompt": "a b c", "temperature": 1.5, "max_tokens": 300},
         {"completion": "c b a", "temperature": 1.5, "max_tokens": 300}),
    Case("complete-defaults", TextGenerator, "complete", {"prompt": "hi"},
         {"completion": "hi", "temperature": 1.0, "max_tokens": 100}),
    Case("complete-edge", TextGenerator, "complete",
         {"prompt": "x" * 1000, "temperature": 0.0, "max_tokens": 100},
         {"completion": "x" * 1000, "temperature": 0.0, "max_tokens": 100}),
    Case("temperature-too-high", TextGenerator, "complete",
         {"prompt": "hi", "temperature": 2.0}, status=400, locs=[["temperature"]]),
    Case("temperature-negative", TextGenerator, "complete",
         {"prompt": "hi", "temperature": -0.1}, status=400, locs=[["temperature"]]),
    Case("max-tokens-zero", TextGenerator, "complete",
         {"prompt": "hi", "max_tokens": 0}, status=400, locs=[["max_tokens"]]),
    Case("max-tokens-not-multiple", TextGenerator, "complete",
         {"prompt": "hi", "max_tokens": 150}, status=400, locs=[["max_tokens"]]),
    Case("max-tokens-negative-multiple", TextGenerator, "complete",
         {"prompt": "hi", "max_tokens": -100}, status=400, locs=[["max_tokens"]]),
    Case("prompt-too-long", TextGenerator, "complete", {"prompt": LONG},
         status=400, locs=[["prompt"]]),
    Case("prompt-missing", TextGenerator, "complete", {"temperature": 1.0},
         status=400, locs=[["prompt"]]),
    Case("several-errors", TextGenerator, "complete",
         {"prompt": LONG, "temperature": 3.0, "max_tokens": 7},
         status=400, locs=[["prompt"], ["temperature"], ["max_tokens"]]),
    # pydantic models in and out ({"params": {...}})
    Case("analyze-ok", ReviewAnalyzer, "analyze",
         {"params": {"text": "love it", "stars": 5, "tags": ["fit"]}},
         {"sentiment": "positive", "score": 1.0, "words": 2, "tags": {"fit": 3}}),
    Case("analyze-datetime", ReviewAnalyzer, "analyze",
         {"params": {"text": "meh", "stars": 3, "posted": "2024-01-02T03:04:05Z"}},
         {"sentiment": "neutral", "score": 0.0, "words": 1, "tags": {}}),
    Case("analyze-bad-fields", ReviewAnalyzer, "analyze",
         {"params": {"text": "", "stars": 6}}, status=400,
         locs=[["params", "text"], ["params", "stars"]]),
    Case("analyze-missing-params", ReviewAnalyzer, "analyze", {}, status=400,
         locs=[["params"]]),
    Case("analyze-missing-nested", ReviewAnalyzer, "analyze", {"params": {"text": "x"}},
         status=400, locs=[["params", "stars"]]),
    # input_spec: the model's fields at the top level
    Case("search-ok", ReviewAnalyzer, "search", {"query": "blue", "top_k": 5},
         ["blue shoes", "blue hat"]),
    Case("search-exact", ReviewAnalyzer, "search", {"query": "red hat", "mode": "exact"},
         ["red hat"]),
    Case("search-bad", ReviewAnalyzer, "search", {"query": "", "top_k": 0}, status=400,
         locs=[["query"], ["top_k"]]),
    # root inputs: the body is the value
    Case("shout", ReviewAnalyzer, "shout", {"text": "quiet"}, "QUIET"),
    Case("stats", ReviewAnalyzer, "stats", {"values": [1, 2, 6]},
         {"min": 1.0, "max": 6.0, "mean": 3.0}),
    Case("stats-empty", ReviewAnalyzer, "stats", {"values": []}, status=400,
         locs=[["values"]]),
    # user exceptions: 500 / INTERNAL, message withheld
    Case("user-exception", ReviewAnalyzer, "fail", {"message": "db password"}, status=500),
    # list/dict inputs with defaults: left out (an empty repeated/map field over gRPC,
    # which proto3 cannot tell from an absent one) means the default
    Case("container-defaults", ContainerDefaults, "defaults", {"x": 1},
         {"tags": ["default"], "b": [1], "opts": {"k": 1}, "x": 1}),
    Case("container-given", ContainerDefaults, "defaults",
         {"tags": ["a", "b"], "b": [2, 3], "opts": {"z": 2}},
         {"tags": ["a", "b"], "b": [2, 3], "opts": {"z": 2}, "x": 0}),
    Case("container-too-long", ContainerDefaults, "defaults", {"b": [1, 2, 3]},
         status=400, locs=[["b"]]),
    # the same inside a nested model message
    Case("nested-container-defaults", ContainerDefaults, "nested",
         {"params": {"need": []}}, {"tags": ["default"], "weights": {"w": 1.0}, "need": []}),
    Case("nested-container-given", ContainerDefaults, "nested",
         {"params": {"tags": ["t"], "weights": {"a": 2.0}, "need": [1]}},
         {"tags": ["t"], "weights": {"a": 2.0}, "need": [1]}),
    # a required list sent empty stays empty
    Case("required-list-empty", ContainerDefaults, "count", {"items": []}, 0),
    Case("required-list", ContainerDefaults, "count", {"items": [4, 5]}, 2),
    Case("quickstart-summary", Quickstart, "summarize", {"text": "a b c d", "max_words": 2},
         {"summary": "a b", "words": 4}),
    Case("quickstart-count", Quickstart, "count", {"text": "two words"},
         {"chars": 9, "words": 2}),
]


def _http(server: Any, case: Case) -> tuple[int, Any, list]:
    api = server.spec.apis[case.api]
    if api.is_root:
        value = case.inputs[api.root_field.name]
        if isinstance(value, str):
            reply = post(server.http_url + api.route, value.encode(), content_type="text/plain")
        else:
            reply = post(server.http_url + api.route, value)
    else:
        reply = post(server.http_url + api.route, case.inputs)
    if reply.status != 200:
        body = reply.json()
        assert "error" in body
        return reply.status, body, reply.error_locs()
    ctype = reply.headers["content-type"]
    result = reply.text if ctype.startswith("text/plain") else reply.json()
    return 200, result, []


def _grpc(server: Any, case: Case) -> tuple[int, Any, list]:
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        try:
            result = caller.call(case.api, case.inputs)
        except grpc.RpcError as exc:
            status = {v: k for k, v in GRPC_CODE.items()}[exc.code()]
            return status, exc.details(), error_locs(exc)
    return 200, to_jsonable_python(result), []


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_same_answer_on_both_protocols(servers, case: Case, protocol: str):
    server = servers[case.service]
    status, result, locs = (_http if protocol == "http" else _grpc)(server, case)
    assert status == case.status, result
    if case.status == 200:
        assert result == case.expect
    else:
        assert locs == case.locs
    if case.status == 500:
        assert "db password" not in json.dumps(result)
        assert "Traceback" not in json.dumps(result)


@pytest.mark.parametrize("api", ["generate", "agenerate"])
def test_streams_match_on_both_protocols(servers, api: str):
    server = servers[LanguageModel]
    inputs = {"prompt": "hello", "max_tokens": 5}
    reply = post(server.http_url + f"/{api}", inputs)
    assert reply.status == 200
    assert reply.headers["content-type"].startswith("text/event-stream")
    http_chunks = [data for event, data in sse_events(reply.body)]
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        grpc_chunks = list(caller.stream(api, inputs))
    assert http_chunks == grpc_chunks
    assert len(grpc_chunks) == 5
    assert all(c.endswith(" ") for c in grpc_chunks)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_stream_rejects_bad_input_before_streaming(servers, protocol: str):
    server = servers[LanguageModel]
    inputs = {"prompt": "hello", "max_tokens": 0}
    if protocol == "http":
        reply = post(server.http_url + "/generate", inputs)
        assert reply.status == 400
        assert reply.error_locs() == [["max_tokens"]]
    else:
        with GrpcCaller(server.spec, server.grpc_target) as caller, \
                pytest.raises(grpc.RpcError) as info:
            list(caller.stream("generate", inputs))
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_locs(info.value) == [["max_tokens"]]


# ---------------------------------------------------------------- dict outputs
BAD = "not-an-int-secret"


class Out(BaseModel):
    a: int
    b: str = "x"


@tensorwire.service
class DictOutputs:
    """Methods returning plain dicts for a declared output model."""

    @tensorwire.api(output_spec=Out)
    def one(self, a: int) -> dict:
        return {"a": a} if a >= 0 else {"a": BAD}

    @tensorwire.api(output_spec=Out)
    def many(self, a: int) -> Generator[dict, None, None]:
        yield {"a": abs(a)}
        yield {"a": a, "b": "y"} if a >= 0 else {"a": BAD}


def test_dict_output_is_validated_with_defaults_on_both_protocols(servers):
    server = servers[DictOutputs]
    reply = post(server.http_url + "/one", {"a": 3})
    assert reply.status == 200
    assert reply.json() == {"a": 3, "b": "x"}
    reply = post(server.http_url + "/many", {"a": 3})
    assert reply.status == 200
    assert [json.loads(d) for _, d in sse_events(reply.body)] == [
        {"a": 3, "b": "x"}, {"a": 3, "b": "y"}]
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        assert caller.call("one", {"a": 3}) == {"a": 3, "b": "x"}
        assert list(caller.stream("many", {"a": 3})) == [
            {"a": 3, "b": "x"}, {"a": 3, "b": "y"}]


def test_invalid_dict_output_is_a_server_error_on_both_protocols(servers):
    server = servers[DictOutputs]
    reply = post(server.http_url + "/one", {"a": -1})
    assert reply.status == 500
    assert reply.headers["x-tensorwire-error"] == "InternalError"
    assert BAD not in reply.text and "Traceback" not in reply.text
    reply = post(server.http_url + "/many", {"a": -1})
    events = sse_events(reply.body)
    assert events[0] == (None, json.dumps({"a": 1, "b": "x"}, separators=(",", ":")))
    assert events[1][0] == "error"
    assert json.loads(events[1][1])["kind"] == "InternalError"
    assert BAD not in reply.text and "Traceback" not in reply.text
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        with pytest.raises(grpc.RpcError) as info:
            caller.call("one", {"a": -1})
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert BAD not in info.value.details() and "Traceback" not in info.value.details()
        assert chunks_before_internal(caller, "many", {"a": -1}) == [{"a": 1, "b": "x"}]


@tensorwire.service
class NestedDictOutputs:
    """Dicts for a model inside an Optional, a list and a map output."""

    @tensorwire.api
    def maybe(self, a: int) -> Out | None:
        return None if a == 0 else {"a": a} if a > 0 else {"a": BAD}

    @tensorwire.api
    def several(self, a: int) -> list[Out]:
        return [{"a": abs(a)}, {"a": a} if a >= 0 else {"a": BAD}]

    @tensorwire.api
    def by_key(self, a: int) -> dict[str, Out]:
        return {"k": {"a": a} if a >= 0 else {"a": BAD}}

    @tensorwire.api
    def chunks(self, a: int) -> Generator[list[Out], None, None]:
        yield [{"a": abs(a)}]
        yield [{"a": a, "b": "y"} if a >= 0 else {"a": BAD}]


@pytest.mark.parametrize(("api", "a", "expect"), [
    ("maybe", 3, {"a": 3, "b": "x"}),
    ("maybe", 0, None),
    ("several", 3, [{"a": 3, "b": "x"}, {"a": 3, "b": "x"}]),
    ("by_key", 3, {"k": {"a": 3, "b": "x"}}),
])
def test_dicts_inside_container_outputs_get_defaults_on_both_protocols(
        servers, api: str, a: int, expect: Any):
    server = servers[NestedDictOutputs]
    reply = post(server.http_url + f"/{api}", {"a": a})
    assert reply.status == 200
    assert reply.json() == expect
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        assert to_jsonable_python(caller.call(api, {"a": a})) == expect


def chunks_before_internal(caller: GrpcCaller, api: str, values: dict) -> list:
    """The chunks a gRPC stream delivered before it failed with INTERNAL (the bad value
    kept off the wire)."""
    got: list = []
    with pytest.raises(grpc.RpcError) as info:
        got.extend(caller.stream(api, values))
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert BAD not in info.value.details()
    return got


def assert_server_error_on_both(server, api: str, values: dict) -> None:
    """500 over HTTP and INTERNAL over gRPC, with neither the bad value nor a traceback
    on the wire."""
    reply = post(server.http_url + f"/{api}", values)
    assert reply.status == 500
    assert reply.headers["x-tensorwire-error"] == "InternalError"
    assert BAD not in reply.text and "Traceback" not in reply.text
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        with pytest.raises(grpc.RpcError) as info:
            caller.call(api, values)
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert BAD not in info.value.details() and "Traceback" not in info.value.details()


@pytest.mark.parametrize("api", ["maybe", "several", "by_key"])
def test_invalid_dicts_inside_container_outputs_are_server_errors(servers, api: str):
    assert_server_error_on_both(servers[NestedDictOutputs], api, {"a": -1})


def test_streamed_lists_of_dicts_are_validated_chunk_by_chunk(servers):
    server = servers[NestedDictOutputs]
    good = [[{"a": 3, "b": "x"}], [{"a": 3, "b": "y"}]]
    reply = post(server.http_url + "/chunks", {"a": 3})
    assert [json.loads(d) for _, d in sse_events(reply.body)] == good
    reply = post(server.http_url + "/chunks", {"a": -1})
    events = sse_events(reply.body)
    assert json.loads(events[0][1]) == [{"a": 1, "b": "x"}]
    assert events[1][0] == "error"
    assert json.loads(events[1][1])["kind"] == "InternalError"
    assert BAD not in reply.text and "Traceback" not in reply.text
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        assert [to_jsonable_python(c) for c in caller.stream("chunks", {"a": 3})] == good
        got = chunks_before_internal(caller, "chunks", {"a": -1})
        assert [to_jsonable_python(c) for c in got] == [[{"a": 1, "b": "x"}]]


# ---------------------------------------------------------------- wrong-typed outputs
@tensorwire.service
class LooseOutputs:
    """Non-model outputs of the wrong type (a ≥ 0: right, or coercible; a < 0: wrong)."""

    @tensorwire.api
    def number(self, a: int) -> int:
        return str(a) if a >= 0 else BAD

    @tensorwire.api
    def numbers(self, a: int) -> list[int]:
        return [abs(a), a if a >= 0 else BAD]

    @tensorwire.api
    def flag(self, a: int) -> bool:
        return a > 0 if a >= 0 else BAD

    @tensorwire.api
    def text(self, a: int) -> str:
        return "ok" if a >= 0 else [BAD]

    @tensorwire.api
    def counts(self, a: int) -> Generator[int, None, None]:
        yield abs(a)
        yield a if a >= 0 else BAD


@pytest.mark.parametrize(("api", "expect"), [
    ("number", 3), ("numbers", [3, 3]), ("flag", True), ("text", "ok")])
def test_outputs_coercible_to_their_type_are_the_same_on_both_protocols(
        servers, api: str, expect: Any):
    server = servers[LooseOutputs]
    reply = post(server.http_url + f"/{api}", {"a": 3})
    assert reply.status == 200
    assert (reply.text if api == "text" else reply.json()) == expect
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        assert caller.call(api, {"a": 3}) == expect


@pytest.mark.parametrize("api", ["number", "numbers", "flag", "text"])
def test_an_output_of_the_wrong_type_is_a_server_error_on_both_protocols(
        servers, api: str):
    assert_server_error_on_both(servers[LooseOutputs], api, {"a": -1})


def test_a_streamed_chunk_of_the_wrong_type_is_a_server_error_on_both_protocols(servers):
    server = servers[LooseOutputs]
    reply = post(server.http_url + "/counts", {"a": -1})
    events = sse_events(reply.body)
    assert events[0] == (None, "1")
    assert events[1][0] == "error"
    assert json.loads(events[1][1])["kind"] == "InternalError"
    assert BAD not in reply.text and "Traceback" not in reply.text
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        assert chunks_before_internal(caller, "counts", {"a": -1}) == [1]
