"""NaN and infinity: refused unless the contract opts in, never answered as `null`, on
both protocols.

HTTP bodies are raw JSON bytes (bare `NaN` tokens, overflowing literals, strings); gRPC
requests are messages whose doubles are set directly, bypassing any client-side check.
"""

from __future__ import annotations

import math

import grpc
import numpy as np
import pytest

from tests.support.grpc_calls import GrpcCaller, error_locs
from tests.support.hostile_service import Hostile
from tests.support.http_calls import get, post, sse_events
from tests.support.servers import serving

NAN, INF = math.nan, math.inf


@pytest.fixture(scope="module")
def server():
    with serving(Hostile) as running:
        yield running


@pytest.fixture(scope="module")
def caller(server):
    caller = GrpcCaller(server.spec, server.grpc_target)
    yield caller
    caller.close()


def http(server, api: str, body: bytes | str):
    return post(f"{server.http_url}/{api}", body.encode() if isinstance(body, str) else body)


def raw_request(caller, api: str):
    return caller.proto.messages[api].request_cls()


def grpc_status(caller, api: str, msg) -> tuple[grpc.StatusCode, list]:
    try:
        caller.call(api, raw=msg)
    except grpc.RpcError as exc:
        return exc.code(), error_locs(exc)
    return grpc.StatusCode.OK, []


# ---------------------------------------------------------------- inputs over HTTP
REFUSED = [
    ("scale", '{"x": NaN}', ["x"]),
    ("scale", '{"x": Infinity}', ["x"]),
    ("scale", '{"x": -Infinity}', ["x"]),
    ("scale", '{"x": 1e999}', ["x"]),
    ("scale", '{"x": -1e999}', ["x"]),
    ("scale", '{"x": "NaN"}', ["x"]),
    ("scale", '{"x": 1, "factor": "Infinity"}', ["factor"]),
    ("total", '{"xs": [1, 2, NaN]}', ["xs", 2]),
    ("table", '{"d": {"a": 1, "b": Infinity}}', ["d", "b"]),
    ("anything", '{"v": {"k": [1, NaN]}}', ["v", "k", 1]),
    ("anything", '{"v": 1e999}', ["v"]),
    ("struct", '{"d": {"a": {"b": -Infinity}}}', ["d", "a", "b"]),
    ("reading", '{"r": {"value": NaN}}', ["r", "value"]),
    ("reading", '{"r": {"value": "Infinity"}}', ["r", "value"]),
    ("mixed", '{"m": {"strict": NaN, "loose": 1}}', ["m", "strict"]),
    ("spec", '{"value": Infinity}', ["value"]),
    ("half", "NaN", ["x"]),
    ("half", "-1e999", ["x"]),
]


@pytest.mark.parametrize("api,body,loc", REFUSED, ids=[f"{a}:{b}" for a, b, _ in REFUSED])
def test_http_nonfinite_inputs_are_400(server, api, body, loc):
    reply = http(server, api, body)
    assert reply.status == 400, reply
    detail = reply.json()["detail"]
    assert detail[0]["loc"] == loc
    assert detail[0]["type"] == "finite_number"


def test_http_multipart_json_part_is_checked_too(server):
    boundary = "nf"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="x"\r\n'
            f"Content-Type: application/json\r\n\r\nNaN\r\n--{boundary}--\r\n").encode()
    reply = post(f"{server.http_url}/scale", body,
                 content_type=f"multipart/form-data; boundary={boundary}")
    assert reply.status == 400
    assert reply.error_locs() == [["x"]]


ACCEPTED = [
    ("loose", '{"x": NaN}', "NaN"),
    ("loose", '{"x": "Infinity"}', "Infinity"),
    ("loose", '{"x": -1e999}', "-Infinity"),
    ("loose_field", '{"x": Infinity}', "Infinity"),
    ("loose_field", '{"x": "NaN"}', "NaN"),
    ("mixed", '{"m": {"strict": 1, "loose": NaN}}', {"strict": 1.0, "loose": "NaN"}),
    ("lenient", '{"r": {"value": -Infinity, "history": [NaN]}}',
     {"value": "-Infinity", "history": ["NaN"]}),
    ("vector", '{"x": [1.0, NaN]}', [1.0, "NaN"]),
    ("vector", '{"x": [1.0, "-Infinity"]}', [1.0, "-Infinity"]),
]


@pytest.mark.parametrize("api,body,answer", ACCEPTED, ids=[f"{a}:{b}" for a, b, _ in ACCEPTED])
def test_http_opted_in_inputs_come_back_as_strings(server, api, body, answer):
    reply = http(server, api, body)
    assert reply.status == 200, reply
    assert reply.json() == answer
    assert b"null" not in reply.body


def test_http_finite_values_are_untouched(server):
    assert http(server, "scale", '{"x": 1.5, "factor": 2}').json() == 3.0
    assert http(server, "total", '{"xs": [1e308, -1e308, 0.5]}').json() == 0.5
    assert http(server, "anything", '{"v": ["NaN", "Infinity"]}').json() == ["NaN", "Infinity"]


# ---------------------------------------------------------------- inputs over gRPC
def test_grpc_nonfinite_doubles_are_invalid_argument(caller):
    cases = []
    msg = raw_request(caller, "scale")
    msg.x = NAN
    cases.append(("scale", msg, ["x"]))
    msg = raw_request(caller, "scale")
    msg.x, msg.factor = 1.0, -INF
    cases.append(("scale", msg, ["factor"]))
    msg = raw_request(caller, "total")
    msg.xs.extend([1.0, INF])
    cases.append(("total", msg, ["xs", 1]))
    msg = raw_request(caller, "table")
    msg.d["k"] = NAN
    cases.append(("table", msg, ["d", "k"]))
    msg = raw_request(caller, "anything")
    msg.v = "[Infinity]"  # Any travels as JSON text over gRPC: the token, not a double
    cases.append(("anything", msg, ["v", 0]))
    msg = raw_request(caller, "reading")
    msg.r.value = NAN
    cases.append(("reading", msg, ["r", "value"]))
    msg = raw_request(caller, "mixed")
    msg.m.strict, msg.m.loose = INF, 1.0
    cases.append(("mixed", msg, ["m", "strict"]))
    for api, msg, loc in cases:
        code, locs = grpc_status(caller, api, msg)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (api, code)
        assert locs == [loc], (api, locs)


def test_grpc_opted_in_doubles_are_faithful(caller):
    msg = raw_request(caller, "loose")
    msg.x = -INF
    assert caller.call("loose", raw=msg) == -INF
    msg = raw_request(caller, "loose_field")
    msg.x = NAN
    assert math.isnan(caller.call("loose_field", raw=msg))
    msg = raw_request(caller, "mixed")
    msg.m.strict, msg.m.loose = 1.0, INF
    assert caller.call("mixed", raw=msg)["loose"] == INF
    msg = raw_request(caller, "lenient")
    msg.r.value = NAN
    msg.r.history.extend([INF])
    answer = caller.call("lenient", raw=msg)
    assert math.isnan(answer["value"]) and answer["history"] == [INF]


# ---------------------------------------------------------------- outputs
REFUSED_OUT = ["make", "make_list", "make_any", "make_reading"]


@pytest.mark.parametrize("kind", ["nan", "inf", "-inf"])
@pytest.mark.parametrize("api", REFUSED_OUT)
def test_nonfinite_outputs_not_opted_in_are_server_errors(server, caller, api, kind):
    reply = http(server, api, f'{{"kind": "{kind}"}}')
    assert reply.status == 500, reply
    assert reply.json()["error"] == "Internal server error"
    with pytest.raises(grpc.RpcError) as exc:
        caller.call(api, {"kind": kind})
    assert exc.value.code() == grpc.StatusCode.INTERNAL
    # finite values pass
    assert http(server, api, '{"kind": "finite"}').status == 200
    caller.call(api, {"kind": "finite"})


@pytest.mark.parametrize("kind,text", [("nan", "NaN"), ("inf", "Infinity"),
                                       ("-inf", "-Infinity")])
def test_opted_in_outputs_are_faithful(server, caller, kind, text):
    value = {"nan": NAN, "inf": INF, "-inf": -INF}[kind]

    def same(a: float) -> bool:
        return math.isnan(a) if math.isnan(value) else a == value

    assert http(server, "make_loose", f'{{"kind": "{kind}"}}').json() == text
    assert same(caller.call("make_loose", {"kind": kind}))
    assert http(server, "make_mixed", f'{{"kind": "{kind}"}}').json() == {
        "strict": 1.0, "loose": text}
    assert same(caller.call("make_mixed", {"kind": kind})["loose"])
    assert http(server, "make_lenient", f'{{"kind": "{kind}"}}').json() == {
        "value": text, "history": [0.5, text]}
    lenient = caller.call("make_lenient", {"kind": kind})
    assert same(lenient["value"]) and same(lenient["history"][1])
    # tensors keep their documented form
    assert http(server, "make_tensor", f'{{"kind": "{kind}"}}').json() == [1.0, text]
    tensor = caller.call("make_tensor", {"kind": kind})
    assert same(float(np.asarray(tensor)[1]))


def test_opted_in_field_of_a_model_writing_null_is_a_json_error_not_null(server, caller):
    """`Silent` opts a field in but keeps pydantic's JSON default (null): JSON cannot
    carry the value faithfully, so HTTP answers 500 (never null); gRPC's double can."""
    reply = http(server, "make_silent", '{"kind": "inf"}')
    assert reply.status == 500 and b"null" not in reply.body
    assert caller.call("make_silent", {"kind": "inf"}) == {"loose": INF}


def test_streamed_nonfinite_chunk_ends_the_stream_with_an_error(server, caller):
    reply = http(server, "make_stream", '{"kind": "nan"}')
    assert reply.status == 200  # the stream had begun
    events = sse_events(reply.body)
    assert events[0] == (None, "1.0")
    assert events[-1][0] == "error" and '"status":500' in events[-1][1]
    assert b"null" not in reply.body
    chunks = []
    with pytest.raises(grpc.RpcError) as exc:
        for chunk in caller.stream("make_stream", {"kind": "inf"}):
            chunks.append(chunk)
    assert chunks == [1.0]
    assert exc.value.code() == grpc.StatusCode.INTERNAL


def test_the_contract_shows_where_the_strings_may_come(server):
    doc = get(f"{server.http_url}/docs.json").json()
    nonfinite = {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}

    def request_x(path: str) -> dict:
        body = doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        return body["schema"]["properties"]["x"]

    def response(path: str) -> dict:
        return doc["paths"][path]["post"]["responses"]["200"]["content"][
            "application/json"]["schema"]

    for path in ("/loose", "/loose_field"):
        assert {k: v for k, v in request_x(path).items() if k != "title"} == nonfinite
    assert response("/make_loose") == nonfinite
    assert request_x("/scale")["type"] == "number" and response("/make") == {"type": "number"}
