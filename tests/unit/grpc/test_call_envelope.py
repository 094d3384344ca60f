"""The one gRPC envelope (`tensorwire.grpc.call_envelope`): every API's method, with or without
a Context, unary or streamed, answered through it (payload, status code, details, error
kind, request id, time limits, metrics, refusals)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import grpc
import pytest
from annotated_types import Ge
from pydantic import BaseModel

import tensorwire
from tensorwire.errors import ERROR_KIND_HEADER
from tensorwire.grpc.call_envelope import CROWDED, GrpcEnvelope, GrpcRoute
from tensorwire.grpc.server import api_route, generic_handler
from tensorwire.protobuf.descriptors import service_proto
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.telemetry.metrics import flush, render


class Point(BaseModel):
    x: float
    y: float


@tensorwire.service(name="EnvelopeGrpc")
class EnvelopeGrpc:
    @tensorwire.api
    async def add(self, a: Annotated[int, Ge(0)], b: int = 1) -> int:
        return a + b

    @tensorwire.api
    def norm(self, p: Point) -> dict[str, float]:
        return {"norm": (p.x ** 2 + p.y ** 2) ** 0.5}

    @tensorwire.api
    async def slow(self, seconds: float) -> float:
        await asyncio.sleep(seconds)
        return seconds

    @tensorwire.api
    def slow_def(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @tensorwire.api
    def broken(self, a: int) -> int:
        raise RuntimeError("a bug, not the client's fault")

    @tensorwire.api
    def shout(self, text: str, /) -> str:
        return text.upper()

    @tensorwire.api
    async def total(self, values: list[float], /) -> float:
        return sum(values)

    @tensorwire.api
    def with_context(self, ctx: tensorwire.Context, a: int) -> int:
        ctx.response.headers["x-seen"] = str(a)
        return a

    @tensorwire.api
    async def count(self, n: Annotated[int, Ge(0)], pause: float = 0.0,
                    fail_at: int = -1) -> AsyncIterator[int]:
        for i in range(n):
            if i == fail_at:
                raise RuntimeError("a bug mid-stream")
            await asyncio.sleep(pause)
            yield i

    @tensorwire.api
    def count_def(self, n: int, pause: float = 0.0) -> Iterator[str]:
        for i in range(n):
            time.sleep(pause)
            yield f"chunk {i}"

    @tensorwire.api
    async def burst(self, n: int) -> AsyncIterator[int]:
        for i in range(n):  # never awaits: every chunk is ready at once
            yield i

    @tensorwire.api
    async def count_with_context(self, ctx: tensorwire.Context, n: int
                                 ) -> AsyncIterator[int]:
        for i in range(n):
            yield i


class Served:
    def __init__(self, runtime: ServiceRuntime, channel: grpc.aio.Channel,
                 envelope: GrpcEnvelope) -> None:
        self.runtime = runtime
        self.channel = channel
        self.envelope = envelope
        self.proto = service_proto(runtime.spec)

    def request(self, api: str, **fields: Any) -> bytes:
        messages = self.proto.messages[api]
        return messages.request_cls(**fields).SerializeToString()

    async def call(self, api: str, data: bytes, **kwargs: Any
                   ) -> tuple[grpc.StatusCode, str, bytes | None, dict[str, str]]:
        try:
            reply = await self.channel.unary_unary(self.path(api))(data, **kwargs)
        except grpc.aio.AioRpcError as err:
            trailing = {k: v for k, v in (err.trailing_metadata() or ())
                        if isinstance(v, str)}
            return err.code(), err.details() or "", None, trailing
        return grpc.StatusCode.OK, "", reply, {}

    async def stream(self, api: str, data: bytes
                     ) -> tuple[grpc.StatusCode, str, list[bytes]]:
        chunks: list[bytes] = []
        try:
            async for chunk in self.channel.unary_stream(self.path(api))(data):
                chunks.append(chunk)
        except grpc.aio.AioRpcError as err:
            return err.code(), err.details() or "", chunks
        return grpc.StatusCode.OK, "", chunks

    def path(self, api: str) -> str:
        return self.proto.method_names[api]

    def route(self, api: str) -> GrpcRoute:
        read, write = api_route(self.proto.messages[api])
        return self.envelope.route(GrpcRoute(api, self.runtime.plan(api), read, write))

    def value(self, api: str, reply: bytes) -> Any:
        messages = self.proto.messages[api]
        return messages.response_value(messages.response_cls.FromString(reply))


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    settings = Settings(request_timeout=1.0, access_log=True)  # a loaded box: no false 504
    runtime = ServiceRuntime(tensorwire.get_service_spec(EnvelopeGrpc), settings)
    await runtime.start()
    proto = service_proto(runtime.spec)
    envelope = GrpcEnvelope(runtime, logging.getLogger("test.envelope"))
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((generic_handler(proto, runtime, envelope),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield Served(runtime, channel, envelope)
    finally:
        await server.stop(None)
        await runtime.close()


def test_every_api_is_served_by_the_one_envelope() -> None:
    """No second handler: each method's behaviour is the envelope's unary or stream
    call, whatever the API needs (a Context, a root input, a thread, a stream)."""

    runtime = ServiceRuntime(tensorwire.get_service_spec(EnvelopeGrpc), Settings())
    asyncio.run(runtime.start())
    try:
        proto = service_proto(runtime.spec)
        envelope = GrpcEnvelope(runtime, logging.getLogger("test.envelope"))
        handler = generic_handler(proto, runtime, envelope)
        for name, messages in proto.messages.items():
            details = _Details(proto.method_names[name])
            method = handler.service(details)
            behaviour = (method.unary_stream if messages.api.output.stream
                         else method.unary_unary)
            assert isinstance(behaviour, functools.partial), name
            expected = envelope.stream if messages.api.output.stream else envelope.unary
            assert behaviour.func == expected, name
    finally:
        asyncio.run(runtime.close())


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


class _Peerless:
    """What a compiled stream reads of its context when it succeeds (the access line)."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


async def _passes_of_a_burst(served: Served, n: int) -> int:
    """Loop passes while the `burst` stream sends `n` chunks that are all ready."""
    route = served.route("burst")
    loop = asyncio.get_running_loop()
    passes = 0
    ticking = True

    def tick() -> None:
        nonlocal passes
        passes += 1
        if ticking:
            loop.call_soon(tick)

    loop.call_soon(tick)
    await asyncio.sleep(0)
    start = passes
    chunks = [c async for c in served.envelope.stream(route, served.request("burst", n=n),
                                                      _Peerless())]  # type: ignore[arg-type]
    ticking = False
    assert len(chunks) == n
    return passes - start


async def test_a_stream_gives_the_loop_a_pass_between_chunks(
        served: Served) -> None:
    """grpc.aio accepts one new call a loop pass: a stream whose chunks are all ready must
    still let the loop turn between them, or new calls wait behind it."""
    assert 8 <= await _passes_of_a_burst(served, 8) < 3 * 8  # alone: one pass a chunk


async def test_a_crowded_worker_gives_three_passes_between_chunks(served: Served) -> None:
    """Taking a new call takes grpc.aio several passes: with many calls in flight a
    stream leaves room for one between its chunks (time to first chunk at 64 streams)."""
    admission = served.runtime.admission
    admission.in_flight += CROWDED  # as if that many other calls were in flight
    try:
        assert await _passes_of_a_burst(served, 8) >= 3 * 8
    finally:
        admission.in_flight -= CROWDED


STREAMS = [
    ("count", {"n": 3}, grpc.StatusCode.OK, 3),
    ("count", {"n": 0}, grpc.StatusCode.OK, 0),
    ("count", {"n": -1}, grpc.StatusCode.INVALID_ARGUMENT, 0),
    ("count", {"n": 3, "fail_at": 2}, grpc.StatusCode.INTERNAL, 2),     # after 2 chunks
    ("count", {"n": 3, "pause": 2.0}, grpc.StatusCode.DEADLINE_EXCEEDED, 0),  # per chunk
    ("count_def", {"n": 3}, grpc.StatusCode.OK, 3),
    ("count_def", {"n": 2, "pause": 2.0}, grpc.StatusCode.DEADLINE_EXCEEDED, 0),
    ("count_with_context", {"n": 2}, grpc.StatusCode.OK, 2),
]
#: What a client reads of each failure (the details; INTERNAL hides the bug's text).
DETAILS = {
    grpc.StatusCode.INVALID_ARGUMENT: "n: Input should be greater than or equal to 0",
    grpc.StatusCode.INTERNAL: "Internal server error",
    grpc.StatusCode.DEADLINE_EXCEEDED: "the request did not complete within 1 s",
}


@pytest.mark.parametrize(("api", "fields", "code", "chunks"), STREAMS)
async def test_streams_answer_their_status_and_chunks(
        served: Served, api: str, fields: dict[str, Any], code: grpc.StatusCode,
        chunks: int) -> None:
    got, details, replies = await served.stream(api, served.request(api, **fields))
    assert got == code, (got, details)
    assert len(replies) == chunks
    if code != grpc.StatusCode.OK:
        assert details == DETAILS[code]
    assert [served.value(api, r) for r in replies][:1] in ([], [0], ["chunk 0"])
    assert served.runtime.deadlines.pending == 0


async def test_a_stream_counts_in_metrics_with_its_bytes(served: Served) -> None:
    flush()
    before = _count("count", "OK")
    code, _, chunks = await served.stream("count", served.request("count", n=4))
    assert code == grpc.StatusCode.OK and len(chunks) == 4
    served.runtime.admission.flush()
    assert _count("count", "OK") == before + 1
    assert served.runtime.admission.in_flight == 0


CASES = [
    ("add", {"a": 2, "b": 3}, grpc.StatusCode.OK, 5),
    ("add", {"a": 2}, grpc.StatusCode.OK, 3),
    ("add", {"a": -1}, grpc.StatusCode.INVALID_ARGUMENT,
     "a: Input should be greater than or equal to 0"),                   # a constraint
    ("norm", {"p": {"x": 3, "y": 4}}, grpc.StatusCode.OK, {"norm": 5.0}),
    ("slow", {"seconds": 0.0}, grpc.StatusCode.OK, 0.0),
    ("slow", {"seconds": 2.0}, grpc.StatusCode.DEADLINE_EXCEEDED,
     "the request did not complete within 1 s"),                       # the server's limit
    ("slow_def", {"seconds": 2.0}, grpc.StatusCode.DEADLINE_EXCEEDED,
     "the request did not complete within 1 s"),
    ("broken", {"a": 1}, grpc.StatusCode.INTERNAL, "Internal server error"),
    ("shout", {"text": "root inputs are positional"}, grpc.StatusCode.OK,
     "ROOT INPUTS ARE POSITIONAL"),                                      # a def
    ("total", {"values": [1.5, 2.5]}, grpc.StatusCode.OK, 4.0),         # an async def
    ("with_context", {"a": 7}, grpc.StatusCode.OK, 7),                  # a Context
]
KINDS = {grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
         grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
         grpc.StatusCode.INTERNAL: "InternalError"}


@pytest.mark.parametrize(("api", "fields", "code", "expected"), CASES)
async def test_each_call_answers_its_value_or_its_error(
        served: Served, api: str, fields: dict[str, Any], code: grpc.StatusCode,
        expected: Any) -> None:
    got, details, reply, trailing = await served.call(api, served.request(api, **fields))
    assert got == code, (got, details)
    if code == grpc.StatusCode.OK:
        assert reply is not None and served.value(api, reply) == expected
    else:
        assert details == expected
        assert trailing[ERROR_KIND_HEADER] == KINDS[code]
        assert trailing["x-request-id"]
    assert served.runtime.deadlines.pending == 0


async def test_a_context_api_sends_its_headers_as_initial_metadata(served: Served) -> None:
    call = served.channel.unary_unary(served.path("with_context"))(
        served.request("with_context", a=3))
    assert served.value("with_context", await call) == 3
    assert ("x-seen", "3") in tuple(await call.initial_metadata())


async def test_a_malformed_message_is_invalid_argument(served: Served) -> None:
    for api in ("add", "with_context"):
        code, details, _, _ = await served.call(api, b"\xff\xff\xff")
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (api, details)


async def test_the_clients_shorter_deadline_bounds_the_call(served: Served) -> None:
    code, _, _, _ = await served.call("slow", served.request("slow", seconds=2.0),
                                      timeout=0.1)
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    await asyncio.sleep(0.05)
    assert served.runtime.deadlines.pending == 0


async def test_an_error_carries_the_request_id_the_client_sent(served: Served) -> None:
    for api, fields in (("add", {"a": -1}), ("with_context", {})):
        code, _, _, trailing = await served.call(
            api, served.request(api, **fields), metadata=(("x-request-id", "grpc-env-1"),))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert trailing["x-request-id"] == "grpc-env-1"


def _count(api: str, code: str) -> float:
    total = 0.0
    for line in render()[0].decode().splitlines():
        if (line.startswith("tensorwire_requests_total{") and f'api="{api}"' in line
                and 'protocol="grpc"' in line and f'status="{code}"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_count_every_call(served: Served) -> None:
    flush()  # counts other runtimes of this process still hold go in before the baseline
    ok, bad = _count("add", "OK"), _count("add", "INVALID_ARGUMENT")
    for _ in range(3):
        assert (await served.call("add", served.request("add", a=1)))[0] == \
            grpc.StatusCode.OK
    await served.call("add", served.request("add", a=-1))
    served.runtime.admission.flush()
    assert _count("add", "OK") == ok + 3
    assert _count("add", "INVALID_ARGUMENT") == bad + 1


@pytest.mark.parametrize("api", ["add", "with_context", "count"])
async def test_draining_refuses_every_call(served: Served, api: str) -> None:
    flush()
    before = _count(api, "UNAVAILABLE")
    served.runtime.admission.draining = True
    try:
        data = served.request(api, **({"n": 1} if api == "count" else {"a": 1}))
        if api == "count":
            code, details, chunks = await served.stream(api, data)
            assert chunks == []
        else:
            code, details, _, _ = await served.call(api, data)
    finally:
        served.runtime.admission.draining = False
    assert code == grpc.StatusCode.UNAVAILABLE
    assert details == "the server is shutting down; retry on another instance"
    served.runtime.admission.flush()
    assert _count(api, "UNAVAILABLE") == before + 1
    assert served.runtime.admission.in_flight == 0


async def test_a_runtime_not_ready_refuses_calls(served: Served) -> None:
    served.runtime.ready = False
    try:
        code, details, _, _ = await served.call("add", served.request("add", a=1))
    finally:
        served.runtime.ready = True
    assert (code, details) == (grpc.StatusCode.UNAVAILABLE, "the service is not ready")
