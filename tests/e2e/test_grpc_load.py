"""No call lost under load on one gRPC channel, with the default settings.

grpc core's "overload protection" (`grpc.http.overload_protection`, on by default) counts
every HTTP/2 stream still *allocated* against `max_concurrent_streams`: a call the server
has answered but whose grpc.aio call object Python has not yet released still counts.
The client, which saw the call end, opens the next one within the advertised limit, and
the server refused it with RST_STREAM REFUSED_STREAM (`UNAVAILABLE` at the client): 10-60
of 200 concurrent `def` calls, and 9-39 % of 1,000 server streams, at a limit of 100.
tensorwire turns that counting off (`tensorwire.grpc.channel_args`): the limit is then the
one the client sees in SETTINGS, and calls beyond it wait in the client, as RFC 9113 says.

Each case runs a real CLI server with its default settings (the cap of 100 streams a
connection included) on asyncio and on uvloop, and counts failed calls: there must be
none. What the cap still bounds is checked too: at most the cap's calls run at once.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Iterator

import grpc
import numpy as np
import pytest
import tritonclient.grpc.aio as tga

import tensorwire
from tensorwire.protobuf.descriptors import service_proto
from tests.support.busy_service import Busy
from tests.support.servers import RunningServer, spawn_cli

pytestmark = pytest.mark.slow
TARGET = "tests.support.busy_service:Busy"
PROTO = service_proto(tensorwire.get_service_spec(Busy))


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def server(request: pytest.FixtureRequest) -> Iterator[RunningServer]:
    running = spawn_cli(TARGET, "--loop", request.param)
    try:
        yield running
    finally:
        running.stop()


def _method(channel: grpc.aio.Channel, api: str) -> Callable[..., object]:
    messages = PROTO.messages[api]
    make = channel.unary_stream if messages.api.output.stream else channel.unary_unary
    return make(PROTO.method_names[api], request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=messages.response_cls.FromString)


async def _run(calls: int, in_flight: int, one: Callable[[int], Awaitable[object]]
               ) -> collections.Counter[str]:
    """`calls` calls, `in_flight` at a time; the failures counted by status and text."""
    failures: collections.Counter[str] = collections.Counter()
    gate = asyncio.Semaphore(in_flight)

    async def call(i: int) -> None:
        async with gate:
            try:
                await one(i)
            except grpc.RpcError as exc:
                failures[f"{exc.code().name}: {exc.details()}"] += 1
            except Exception as exc:  # tritonclient wraps grpc's error
                failures[f"{type(exc).__name__}: {exc}"] += 1

    await asyncio.gather(*(call(i) for i in range(calls)))
    return failures


def native_unary(server: RunningServer, api: str, calls: int, in_flight: int,
                 **values: object) -> collections.Counter[str]:
    async def main() -> collections.Counter[str]:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            method = _method(channel, api)
            request = PROTO.messages[api].request

            async def one(i: int) -> None:
                reply = await method(request({"x": i, **values}), timeout=120)
                assert PROTO.messages[api].response_value(reply) == i

            return await _run(calls, in_flight, one)

    return asyncio.run(main())


def test_200_concurrent_def_calls_on_one_warm_channel(server: RunningServer) -> None:
    async def main() -> collections.Counter[str]:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            hold = _method(channel, "hold")
            request = PROTO.messages["hold"].request
            await hold(request({"x": 1, "seconds": 0}), timeout=30)  # warm: SETTINGS read

            async def one(i: int) -> None:
                reply = await hold(request({"x": i, "seconds": 0.05}), timeout=120)
                assert PROTO.messages["hold"].response_value(reply) == i

            return await _run(200, 200, one)

    assert asyncio.run(main()) == {}


def test_5000_native_calls_64_in_flight(server: RunningServer) -> None:
    assert native_unary(server, "echo", 5000, 64) == {}


def test_5000_v2_calls_64_in_flight(server: RunningServer) -> None:
    async def main() -> collections.Counter[str]:
        async with tga.InferenceServerClient(server.grpc_target) as client:
            async def one(i: int) -> None:
                x = tga.InferInput("x", [1], "INT64")
                x.set_data_from_numpy(np.array([i], dtype=np.int64))
                result = await client.infer("echo", [x], client_timeout=120)
                assert result.as_numpy("result").tolist() == [i]

            return await _run(5000, 64, one)

    assert asyncio.run(main()) == {}


def test_1000_server_streams_on_one_connection(server: RunningServer) -> None:
    async def main() -> collections.Counter[str]:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            count = _method(channel, "count")
            request = PROTO.messages["count"].request
            value = PROTO.messages["count"].response_value

            async def one(i: int) -> None:
                got = [value(reply) async for reply in count(request({"n": 3}), timeout=120)]
                assert got == [0, 1, 2]

            return await _run(1000, 1000, one)

    assert asyncio.run(main()) == {}


def test_the_stream_cap_still_bounds_the_calls_running_at_once() -> None:
    """300 calls in flight on one channel, a cap of 20: every call answered, and never
    more than 20 running in the method at once (the rest waited in the client)."""
    running = spawn_cli(TARGET, "--grpc-max-concurrent-streams", "20")
    try:
        assert native_unary(running, "wait", 300, 300, seconds=0.05) == {}

        async def peak() -> int:
            async with grpc.aio.insecure_channel(running.grpc_target) as channel:
                reply = await _method(channel, "peak")(PROTO.messages["peak"].request({}))
                return PROTO.messages["peak"].response_value(reply)

        seen = asyncio.run(peak())
        assert 10 <= seen <= 20, seen
    finally:
        running.stop()
