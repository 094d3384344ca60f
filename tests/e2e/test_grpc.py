"""gRPC transport: health, reflection-only clients, streaming, deadlines, cancellation."""

from __future__ import annotations

import time

import grpc
import pytest
from google.protobuf import descriptor_pool, message_factory
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from examples.quickstart import Quickstart
from tests.e2e.services import EVENTS, Probe
from tests.support.grpc_calls import GrpcCaller
from tests.support.servers import serving


def test_health_reports_serving_for_server_and_service(servers):
    server = servers[Quickstart]
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for name in ("", server.spec.grpc_service_name):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        with pytest.raises(grpc.RpcError) as info:
            stub.Check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=5)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_client_knowing_only_the_address_discovers_and_calls(servers):
    """Reflection lists the services; descriptors from it build the messages."""
    server = servers[Quickstart]
    with grpc.insecure_channel(server.grpc_target) as channel:
        db = ProtoReflectionDescriptorDatabase(channel)
        services = db.get_services()
        service_name = next(s for s in services if s.endswith(".Quickstart"))
        assert "grpc.health.v1.Health" in services
        pool = descriptor_pool.DescriptorPool(db)
        service = pool.FindServiceByName(service_name)
        method = service.methods_by_name["Summarize"]
        request_cls = message_factory.GetMessageClass(method.input_type)
        response_cls = message_factory.GetMessageClass(method.output_type)
        call = channel.unary_unary(f"/{service_name}/Summarize",
                                   request_serializer=request_cls.SerializeToString,
                                   response_deserializer=response_cls.FromString)
        reply = call(request_cls(text="reflection works fine", max_words=2), timeout=5)
        assert reply.summary == "reflection works"
        assert reply.words == 3
        # every service listed can be described (health and reflection included)
        for name in services:
            assert pool.FindServiceByName(name).full_name == name


def test_stream_chunks_arrive_as_they_are_produced(servers):
    server = servers[Probe]
    tag = f"grpc-stream-{time.monotonic()}"
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        chunks = caller.stream("ticks", {"n": 3, "delay": 0.3, "tag": tag})
        first = next(chunks)
        seen_at = time.monotonic()
        rest = list(chunks)
    assert first == "tick 0" and rest == ["tick 1", "tick 2"]
    last_produced = max(t for g, i, t in EVENTS["produced"] if g == tag)
    assert seen_at < last_produced


@pytest.mark.parametrize("api", ["sleepy", "blocking"])
def test_deadline_is_honoured_and_the_server_keeps_serving(servers, api):
    server = servers[Probe]
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as info:
            caller.call(api, {"seconds": 2.0}, timeout=0.3)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - started < 1.5
        assert caller.call(api, {"seconds": 0.0}) == "done"


def test_cancelling_a_call_stops_the_work(servers):
    server = servers[Probe]
    tag = f"cancel-{time.monotonic()}"
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        messages, method = caller._method("cancellable", stream=False)
        future = method.future(messages.request({"seconds": 10, "tag": tag}), timeout=30)
        time.sleep(0.3)
        future.cancel()
        for _ in range(100):
            if tag in EVENTS["cancelled"]:
                break
            time.sleep(0.02)
        assert tag in EVENTS["cancelled"]


def test_cancelling_a_stream_closes_the_generator(servers):
    server = servers[Probe]
    tag = f"cancel-stream-{time.monotonic()}"
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        messages, method = caller._method("sync_ticks", stream=True)
        call = method(messages.request({"n": 10_000, "delay": 0.01, "tag": tag}), timeout=30)
        next(call)
        call.cancel()
        for _ in range(200):
            if tag in EVENTS["closed"]:
                break
            time.sleep(0.02)
        assert tag in EVENTS["closed"]


def test_malformed_request_bytes_are_invalid_argument(servers):
    server = servers[Quickstart]
    with grpc.insecure_channel(server.grpc_target) as channel:
        raw = channel.unary_unary(f"/{server.spec.grpc_service_name}/Summarize")
        with pytest.raises(grpc.RpcError) as info:
            raw(b"\x0a\xff\xff\xff\xff", timeout=5)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        unknown = channel.unary_unary(f"/{server.spec.grpc_service_name}/Nope")
        with pytest.raises(grpc.RpcError) as info:
            unknown(b"", timeout=5)
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_message_larger_than_the_limit_is_resource_exhausted():
    with serving(Probe, max_request_size=1024) as server, \
            GrpcCaller(server.spec, server.grpc_target) as caller:
            assert caller.call("echo_bytes", {"data": b"x" * 100}) == 100
            with pytest.raises(grpc.RpcError) as info:
                caller.call("echo_bytes", {"data": b"x" * 4000})
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert caller.call("echo_bytes", {"data": b"ok"}) == 2


def test_context_headers_become_metadata(servers):
    server = servers[Probe]
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        messages, method = caller._method("headers", stream=False)
        reply, call = method.with_call(messages.request({}), timeout=5,
                                       metadata=[("x-custom", "meta")])
        assert messages.response_value(reply) == {"protocol": "grpc", "x-custom": "meta",
                                                  "api": "headers"}
        assert ("x-probe", "yes") in call.initial_metadata()
