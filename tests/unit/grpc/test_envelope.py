"""The compiled gRPC unary handler: chosen for APIs without a Context, files, streams or
tracing, and answering exactly as the general handler does (payload, status code,
details, request id, time limits, metrics)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import grpc
import pytest
from annotated_types import Ge
from pydantic import BaseModel

import tensorwire
from tensorwire.errors import ERROR_KIND_HEADER
from tensorwire.grpc.compiled import CROWDED
from tensorwire.grpc.server import GrpcEndpoint
from tensorwire.protobuf.descriptors import service_proto
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.telemetry.metrics import flush, render


class Point(BaseModel):
    x: float
    y: float


@tensorwire.service(name="CompiledGrpc")
class CompiledGrpc:
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


GENERAL = "test.General"


class Served:
    def __init__(self, runtime: ServiceRuntime, channel: grpc.aio.Channel) -> None:
        self.runtime = runtime
        self.channel = channel
        self.proto = service_proto(runtime.spec)

    def request(self, api: str, **fields: Any) -> bytes:
        messages = self.proto.messages[api]
        return messages.request_cls(**fields).SerializeToString()

    async def call(self, path: str, data: bytes, **kwargs: Any
                   ) -> tuple[grpc.StatusCode, str, bytes | None, dict[str, str]]:
        try:
            reply = await self.channel.unary_unary(path)(data, **kwargs)
        except grpc.aio.AioRpcError as err:
            trailing = {k: v for k, v in (err.trailing_metadata() or ())
                        if isinstance(v, str)}
            return err.code(), err.details() or "", None, trailing
        return grpc.StatusCode.OK, "", reply, {}

    async def stream(self, path: str, data: bytes
                     ) -> tuple[grpc.StatusCode, str, list[bytes]]:
        chunks: list[bytes] = []
        try:
            async for chunk in self.channel.unary_stream(path)(data):
                chunks.append(chunk)
        except grpc.aio.AioRpcError as err:
            return err.code(), err.details() or "", chunks
        return grpc.StatusCode.OK, "", chunks

    def paths(self, api: str) -> tuple[str, str]:
        """(compiled, general) rpc paths of `api`."""
        path = self.proto.method_names[api]
        return path, f"/{GENERAL}/{path.rsplit('/', 1)[-1]}"


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    settings = Settings(request_timeout=0.3, access_log=True)
    runtime = ServiceRuntime(tensorwire.get_service_spec(CompiledGrpc), settings)
    await runtime.start()
    proto = service_proto(runtime.spec)
    compiled: dict[str, grpc.RpcMethodHandler] = {}
    general: dict[str, grpc.RpcMethodHandler] = {}
    for name, messages in proto.messages.items():
        endpoint = GrpcEndpoint(messages, runtime)
        method = proto.method_names[name].rsplit("/", 1)[-1]
        if messages.api.output.stream:
            compiled[method] = grpc.unary_stream_rpc_method_handler(endpoint.handler)
            general[method] = grpc.unary_stream_rpc_method_handler(endpoint.stream)
        else:
            compiled[method] = grpc.unary_unary_rpc_method_handler(endpoint.handler)
            general[method] = grpc.unary_unary_rpc_method_handler(endpoint.unary)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler(proto.spec.grpc_service_name, compiled),
        grpc.method_handlers_generic_handler(GENERAL, general)))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield Served(runtime, channel)
    finally:
        await server.stop(None)
        await runtime.close()


async def test_plain_apis_get_a_compiled_handler(served: Served) -> None:
    for name in ("add", "norm", "slow", "slow_def", "broken", "shout", "total"):
        endpoint = GrpcEndpoint(served.proto.messages[name], served.runtime)
        assert endpoint.handler != endpoint.unary, name


async def test_a_context_api_keeps_the_general_handler(served: Served) -> None:
    endpoint = GrpcEndpoint(served.proto.messages["with_context"], served.runtime)
    assert endpoint.handler == endpoint.unary
    streaming = GrpcEndpoint(served.proto.messages["count_with_context"], served.runtime)
    assert streaming.handler == streaming.stream


async def test_streams_get_a_compiled_handler(served: Served) -> None:
    for name in ("count", "count_def"):
        endpoint = GrpcEndpoint(served.proto.messages[name], served.runtime)
        assert endpoint.handler != endpoint.stream, name


class _Peerless:
    """What a compiled stream reads of its context when it succeeds (the access line)."""

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


async def _passes_of_a_burst(served: Served, n: int) -> int:
    """Loop passes while the compiled `burst` stream sends `n` chunks that are all ready."""
    endpoint = GrpcEndpoint(served.proto.messages["burst"], served.runtime)
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
    chunks = [c async for c in endpoint.handler(served.request("burst", n=n), _Peerless())]
    ticking = False
    assert len(chunks) == n
    return passes - start


async def test_a_compiled_stream_gives_the_loop_a_pass_between_chunks(
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
    ("count", {"n": 3, "pause": 1.0}, grpc.StatusCode.DEADLINE_EXCEEDED, 0),  # per chunk
    ("count_def", {"n": 3}, grpc.StatusCode.OK, 3),
    ("count_def", {"n": 2, "pause": 1.0}, grpc.StatusCode.DEADLINE_EXCEEDED, 0),
]


@pytest.mark.parametrize(("api", "fields", "code", "chunks"), STREAMS)
async def test_compiled_streams_answer_as_the_general_one(
        served: Served, api: str, fields: dict[str, Any], code: grpc.StatusCode,
        chunks: int) -> None:
    data = served.request(api, **fields)
    answers = [await served.stream(path, data) for path in served.paths(api)]
    assert answers[0] == answers[1]
    assert answers[0][0] == code, answers[0]
    assert len(answers[0][2]) == chunks


async def test_a_stream_counts_in_metrics_with_its_bytes(served: Served) -> None:
    flush()
    before = _count("count", "OK")
    compiled, _ = served.paths("count")
    code, _, chunks = await served.stream(compiled, served.request("count", n=4))
    assert code == grpc.StatusCode.OK and len(chunks) == 4
    served.runtime.admission.flush()
    assert _count("count", "OK") == before + 1
    assert served.runtime.admission.in_flight == 0


CASES = [
    ("add", {"a": 2, "b": 3}, grpc.StatusCode.OK),
    ("add", {"a": 2}, grpc.StatusCode.OK),
    ("add", {"a": -1}, grpc.StatusCode.INVALID_ARGUMENT),       # a constraint
    ("norm", {"p": {"x": 3, "y": 4}}, grpc.StatusCode.OK),
    ("slow", {"seconds": 0.0}, grpc.StatusCode.OK),
    ("slow", {"seconds": 2.0}, grpc.StatusCode.DEADLINE_EXCEEDED),  # the server's limit
    ("slow_def", {"seconds": 2.0}, grpc.StatusCode.DEADLINE_EXCEEDED),
    ("broken", {"a": 1}, grpc.StatusCode.INTERNAL),
    ("shout", {"text": "root inputs are positional"}, grpc.StatusCode.OK),  # a def
    ("total", {"values": [1.5, 2.5]}, grpc.StatusCode.OK),                  # an async def
]


@pytest.mark.parametrize(("api", "fields", "code"), CASES)
async def test_the_compiled_handler_answers_as_the_general_one(
        served: Served, api: str, fields: dict[str, Any], code: grpc.StatusCode) -> None:
    data = served.request(api, **fields)
    answers = []
    for path in served.paths(api):
        got, details, reply, trailing = await served.call(path, data)
        answers.append((got, details, reply, trailing.get(ERROR_KIND_HEADER)))
    assert answers[0] == answers[1]
    assert answers[0][0] == code, answers[0]


async def test_a_malformed_message_is_invalid_argument(served: Served) -> None:
    for path in served.paths("add"):
        code, details, _, _ = await served.call(path, b"\xff\xff\xff")
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (path, details)


async def test_the_clients_shorter_deadline_bounds_the_call(served: Served) -> None:
    compiled, _ = served.paths("slow")
    code, _, _, _ = await served.call(compiled, served.request("slow", seconds=2.0),
                                      timeout=0.1)
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    await asyncio.sleep(0.05)
    assert served.runtime.deadlines.pending == 0


async def test_an_error_carries_the_request_id_the_client_sent(served: Served) -> None:
    compiled, _ = served.paths("add")
    code, _, _, trailing = await served.call(compiled, served.request("add", a=-1),
                                             metadata=(("x-request-id", "grpc-compiled-1"),))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert trailing["x-request-id"] == "grpc-compiled-1"


def _count(api: str, code: str) -> float:
    total = 0.0
    for line in render()[0].decode().splitlines():
        if (line.startswith("tensorwire_requests_total{") and f'api="{api}"' in line
                and 'protocol="grpc"' in line and f'status="{code}"' in line):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_count_compiled_calls(served: Served) -> None:
    flush()  # counts other runtimes of this process still hold go in before the baseline
    ok, bad = _count("add", "OK"), _count("add", "INVALID_ARGUMENT")
    compiled, _ = served.paths("add")
    for _ in range(3):
        assert (await served.call(compiled, served.request("add", a=1)))[0] == \
            grpc.StatusCode.OK
    await served.call(compiled, served.request("add", a=-1))
    served.runtime.admission.flush()
    assert _count("add", "OK") == ok + 3
    assert _count("add", "INVALID_ARGUMENT") == bad + 1


async def test_draining_falls_back_to_the_general_refusal(served: Served) -> None:
    served.runtime.admission.draining = True
    try:
        answers = [await served.call(path, served.request("add", a=1))
                   for path in served.paths("add")]
    finally:
        served.runtime.admission.draining = False
    assert answers[0][0] == answers[1][0] == grpc.StatusCode.UNAVAILABLE
    assert answers[0][1] == answers[1][1]
