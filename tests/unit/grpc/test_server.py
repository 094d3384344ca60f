"""`tensorwire.grpc.server`: one API's read and write (`api_route`) called directly, and
the `GrpcServer` around the envelope: its port, health (liveness apart from readiness,
the worker's identity), the message size limit, and services beside the API's own.

Which envelope call serves each method is `test_call_envelope`'s subject."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Annotated, Any

import grpc
import pytest
from annotated_types import Ge
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2 as rpb
from pydantic import BaseModel

import tensorwire
from tensorwire.errors import InvalidArgument
from tensorwire.grpc.call_envelope import GrpcEnvelope
from tensorwire.grpc.server import LIVENESS_SERVICE, ExtraService, GrpcServer, api_route
from tensorwire.protobuf.descriptors import service_proto
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class Point(BaseModel):
    x: float
    y: float = 0.0


@tensorwire.service(name="Served")
class Served:
    @tensorwire.api
    def add(self, a: Annotated[int, Ge(0)], b: int = 1) -> int:
        return a + b

    @tensorwire.api
    def mirror(self, p: Point) -> Point:
        return Point(x=-p.x, y=-p.y)

    @tensorwire.api
    def echo(self, text: str) -> str:
        return text


PROTO = service_proto(tensorwire.get_service_spec(Served))
SERVICE = PROTO.spec.grpc_service_name


class _Scope:
    reading_request = True
    limits: dict[str, Any] = {}
    state: dict[str, Any] = {}


def test_api_route_reads_validated_arguments_and_writes_the_response() -> None:
    messages = PROTO.messages["add"]
    read, write = api_route(messages)
    assert read(messages.request_bytes({"a": 2}), _Scope()) == {"a": 2, "b": 1}
    assert read(messages.request_bytes({"a": 2, "b": 5}), _Scope()) == {"a": 2, "b": 5}
    assert messages.parse_response(write(3)) == 3


def test_api_route_round_trips_a_model() -> None:
    messages = PROTO.messages["mirror"]
    read, write = api_route(messages)
    values = read(messages.request_bytes({"p": Point(x=1.5)}), _Scope())
    assert values == {"p": Point(x=1.5, y=0.0)}
    assert messages.parse_response(write(Point(x=-1.5, y=2.0))) == {"x": -1.5, "y": 2.0}


def test_api_route_refuses_what_the_api_s_validation_refuses() -> None:
    messages = PROTO.messages["add"]
    read, _ = api_route(messages)
    with pytest.raises(InvalidArgument) as info:
        read(messages.request_bytes({"a": -1}), _Scope())
    assert [d["loc"] for d in info.value.detail] == [["a"]]
    with pytest.raises(InvalidArgument) as info:
        read(messages.request_bytes({}), _Scope())
    assert [d["loc"] for d in info.value.detail] == [["a"]]
    with pytest.raises(InvalidArgument, match=r"is not a valid served\.AddRequest protobuf"):
        read(b"\xff\xff\xff", _Scope())


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = ServiceRuntime(tensorwire.get_service_spec(Served),
                             Settings(max_request_size=4096, workers=3))
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


class Extra:
    """A service beside the API's own, recording what the server gave it."""

    name = "extra.Beside"

    def __init__(self) -> None:
        self.envelopes: list[GrpcEnvelope] = []
        self.pools: list[descriptor_pool.DescriptorPool] = []

    def service(self) -> ExtraService:
        def handler(envelope: GrpcEnvelope) -> grpc.GenericRpcHandler:
            self.envelopes.append(envelope)
            return grpc.method_handlers_generic_handler(self.name, {})

        return ExtraService(self.name, handler, self.pools.append)


@pytest.fixture
async def server(runtime: ServiceRuntime) -> AsyncIterator[tuple[GrpcServer, Extra]]:
    extra = Extra()
    server = GrpcServer(runtime, extra=[extra.service()])
    server.bind("127.0.0.1", 0)
    await server.start()
    try:
        yield server, extra
    finally:
        await server.stop(None)


async def _check(channel: grpc.aio.Channel, service: str) -> tuple[Any, dict[str, Any]]:
    stub = health_pb2_grpc.HealthStub(channel)
    call = stub.Check(health_pb2.HealthCheckRequest(service=service))
    reply = await call
    return reply.status, dict(await call.initial_metadata())


def _channel(server: GrpcServer) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")


async def test_bind_gives_the_port_it_listens_on(server: tuple[GrpcServer, Extra]) -> None:
    grpc_server, _ = server
    assert grpc_server.port
    async with _channel(grpc_server) as channel:
        messages = PROTO.messages["add"]
        reply = await channel.unary_unary(PROTO.method_names["add"])(
            messages.request_bytes({"a": 40, "b": 2}))
        assert messages.parse_response(reply) == 42


async def test_liveness_serves_from_the_start_and_readiness_follows_set_serving(
        server: tuple[GrpcServer, Extra]) -> None:
    grpc_server, extra = server
    readiness = ("", SERVICE, extra.name)
    assert grpc_server.served == (SERVICE, extra.name)
    async with _channel(grpc_server) as channel:
        assert (await _check(channel, LIVENESS_SERVICE))[0] == SERVING
        await grpc_server.set_serving(True)
        for name in readiness:
            assert (await _check(channel, name))[0] == SERVING, name
        await grpc_server.set_serving(False)  # draining
        for name in readiness:
            assert (await _check(channel, name))[0] == NOT_SERVING, name
        assert (await _check(channel, LIVENESS_SERVICE))[0] == SERVING


async def test_health_names_the_worker_holding_the_connection(
        server: tuple[GrpcServer, Extra]) -> None:
    grpc_server, _ = server
    async with _channel(grpc_server) as channel:
        _, first = await _check(channel, LIVENESS_SERVICE)
        _, again = await _check(channel, LIVENESS_SERVICE)
    assert first["tensorwire-workers"] == "3"
    worker = first["tensorwire-worker"]
    assert len(worker) == 16 and int(worker, 16) >= 0
    assert again["tensorwire-worker"] == worker


async def test_a_service_beside_shares_the_envelope_pool_and_reflection(
        server: tuple[GrpcServer, Extra]) -> None:
    grpc_server, extra = server
    assert extra.envelopes == [grpc_server.envelope]
    assert extra.pools == [grpc_server.proto.pool]
    async with _channel(grpc_server) as channel:
        call = channel.stream_stream(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            request_serializer=rpb.ServerReflectionRequest.SerializeToString,
            response_deserializer=rpb.ServerReflectionResponse.FromString)
        [reply] = [r async for r in call(iter([rpb.ServerReflectionRequest(
            list_services="")]))]
    assert {s.name for s in reply.list_services_response.service} == {
        SERVICE, extra.name, "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}


async def test_a_message_over_max_request_size_is_refused(
        server: tuple[GrpcServer, Extra]) -> None:
    grpc_server, _ = server
    messages = PROTO.messages["echo"]
    async with _channel(grpc_server) as channel:
        echo = channel.unary_unary(PROTO.method_names["echo"])
        small = await echo(messages.request_bytes({"text": "x" * 1000}))
        assert messages.parse_response(small) == "x" * 1000
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await echo(messages.request_bytes({"text": "x" * 5000}))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this host")
async def test_an_ipv6_host_is_bound_in_brackets(runtime: ServiceRuntime) -> None:
    server = GrpcServer(runtime)
    port = server.bind("::1", 0)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"[::1]:{port}") as channel:
            assert (await _check(channel, LIVENESS_SERVICE))[0] == SERVING
    finally:
        await server.stop(None)
