"""gRPC transport (grpc.aio): generic handlers over the generated message classes.

Every API's request bytes are parsed here (so a malformed message is INVALID_ARGUMENT,
not grpc's opaque INTERNAL), validated by the same `Decoder` the HTTP routes use, and
the result encoded by the API's codec; the call itself goes through the one envelope
(`tensorwire.grpc.call_envelope`) that the Open Inference Protocol's servicer shares. Health
and reflection are served over the service's private descriptor pool.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..contract.decoding import Decoder
from ..protobuf.descriptors import ServiceProto, locked_service_proto
from ..protobuf.messages import APIMessages
from ..runtime.hosted import Hosted
from ..runtime.plan import RequestPlan
from ..runtime.service import ServiceRuntime
from ..settings import Settings
from ..wire.worker_identity import WORKER_HEADER, WORKERS_HEADER
from . import reflection
from .call_envelope import GrpcEnvelope, GrpcRoute
from .channel_args import connection_options

log = logging.getLogger("tensorwire.grpc")

#: grpc.health.v1 service name for liveness (Kubernetes: `grpc: {service: liveness}`).
#: It stays SERVING while the process drains; "" and the API service answer readiness
#: and flip to NOT_SERVING on SIGTERM. A liveness probe on "" would restart a pod that
#: is only draining and cut its in-flight requests.
LIVENESS_SERVICE = "liveness"


def api_route(messages: APIMessages) -> tuple[Callable[[bytes, Any], dict[str, Any]],
                                              Callable[[Any], bytes]]:
    """How one API's own messages read and write: request bytes -> validated arguments
    (the same `Decoder` the HTTP routes use), a result or chunk -> response bytes."""
    read_values = messages.request_reader()
    validate = Decoder(messages.api).read_values_decoder()

    def read(data: bytes, scope: Any) -> dict[str, Any]:
        return validate(read_values(data, scope))

    return read, messages.response_encoder()


def streamed_read(plan: RequestPlan, read: Callable[[bytes, Any], dict[str, Any]]
                  ) -> Callable[[Any, Any], dict[str, Any]]:
    """How a streamed-input call's request messages become its arguments: the plan's
    element stream over them, each message read as a one-element request by `read`."""
    def read_stream(messages: Any, scope: Any) -> dict[str, Any]:
        return plan.feed(messages, read, scope)

    return read_stream


#: The grpc.aio handler of each cardinality: (input streamed, output streamed) ->.
_HANDLER_KINDS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def generic_handler(proto: ServiceProto, runtime: ServiceRuntime,
                    envelope: GrpcEnvelope) -> grpc.GenericRpcHandler:
    """Every API of the service as a method of its gRPC service, through `envelope`
    (one answer: `unary`; a stream of answers: `stream`; a streamed input on either).
    The routes hold the APIs' plans, which outlive `runtime` (model control), and
    carry the APIs' public names (their metrics labels)."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for name, messages in proto.messages.items():
        path = proto.method_names[name]
        method = path.rsplit("/", 1)[-1]
        read, write = api_route(messages)
        plan = runtime.plan(name)
        if plan.streams_in:
            read = streamed_read(plan, read)
        route = envelope.route(GrpcRoute(runtime.public(name), plan, read, write), method,
                               path)
        streams_out = messages.api.output.stream
        handlers[method] = _HANDLER_KINDS[plan.streams_in, streams_out](
            functools.partial(envelope.stream if streams_out else envelope.unary, route))
    return grpc.method_handlers_generic_handler(proto.spec.grpc_service_name, handlers)


class _Health(health.aio.HealthServicer):
    """grpc.health.v1 whose Check also names the worker holding the connection (see
    `tensorwire.wire.worker_identity`): tensorwire's client spreads its calls by it."""

    def __init__(self, workers: int) -> None:
        super().__init__()
        self._identity = ((WORKER_HEADER, os.urandom(8).hex()), (WORKERS_HEADER, str(workers)))

    async def Check(self, request: health_pb2.HealthCheckRequest,
                    context: grpc.aio.ServicerContext) -> health_pb2.HealthCheckResponse:
        await context.send_initial_metadata(self._identity)
        return await super().Check(request, context)


@dataclass(frozen=True)
class ExtraService:
    """Another gRPC service on the same server (the Open Inference Protocol's): health
    reports it with the API's service, reflection lists and describes it."""

    #: Its full name (`inference.GRPCInferenceService`).
    name: str
    #: Its methods, served through the server's one envelope.
    handler: Callable[[GrpcEnvelope], grpc.GenericRpcHandler]
    #: Adds the files that describe it to a descriptor pool (reflection's).
    add_files: Callable[[descriptor_pool.DescriptorPool], None]


class GrpcServer:
    """A grpc.aio server carrying the server's services (one, or several: each its own
    gRPC service), health and reflection (and `extra` services beside them)."""

    def __init__(self, services: ServiceRuntime | Sequence[Hosted],
                 settings: Settings | None = None,
                 interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
                 extra: Sequence[ExtraService] = ()) -> None:
        hosted = ([Hosted.of(services)] if isinstance(services, ServiceRuntime)
                  else list(services))
        self.services = hosted
        self.runtime = hosted[0].runtime
        self.settings = settings or hosted[0].settings
        # Numbered as the published contract says, when serving with --proto-lock.
        protos = [locked_service_proto(h.spec, self.settings.proto_lock) for h in hosted]
        #: The first service's contract; `protos`: every service's, by gRPC service name.
        self.proto = protos[0]
        self.protos = {p.spec.grpc_service_name: p for p in protos}
        self.health = _Health(self.settings.workers)
        options = [
            ("grpc.max_receive_message_length", self.settings.max_request_size),
            ("grpc.max_send_message_length", self.settings.max_response_size),
            ("grpc.so_reuseport", 1 if self.settings.workers > 1 else 0),
            *connection_options(self.settings),
        ]
        self.server = grpc.aio.server(options=options, interceptors=list(interceptors) or None)
        #: What every call of every service here goes through.
        self.envelope = GrpcEnvelope(self.runtime, log)
        self.server.add_generic_rpc_handlers((
            *(generic_handler(p, h.runtime, self.envelope) for p, h in zip(protos, hosted,
                                                                          strict=True)),
            *(e.handler(self.envelope) for e in extra)))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        # One pool describes every service here: the one service's own, or a new one
        # holding each service's file (their shared imports once).
        pool = self.proto.pool
        if len(protos) > 1:
            pool = descriptor_pool.DescriptorPool()
            for proto in protos:
                reflection.add_file(pool, proto.pool.FindFileByName(proto.file_name))
        reflection.add_infra_files(pool)
        for service in extra:
            service.add_files(pool)
        #: What readiness (health "" and each of these) reports.
        self.served = (*self.protos, *(e.name for e in extra))
        self._extra = tuple(e.name for e in extra)
        infra = (health.SERVICE_NAME, reflection.V1, reflection.V1ALPHA)
        # Reflection lists the services loaded now (model control moves them in and out;
        # their files stay described).
        self.reflection = reflection.ReflectionServicer(
            pool, lambda: (*self._loaded(), *self._extra, *infra),
            {p.file_name: p.file_proto.SerializeToString() for p in protos})
        self.server.add_generic_rpc_handlers(self.reflection.handlers())
        self.port: int | None = None

    def bind(self, host: str, port: int,
             credentials: grpc.ServerCredentials | None = None) -> int:
        """Listen on host:port, with TLS when `credentials` are given."""
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if credentials is None:
            self.port = self.server.add_insecure_port(address)
        else:
            self.port = self.server.add_secure_port(address, credentials)
        if not self.port:
            raise OSError(f"cannot bind gRPC to {host}:{port}")
        return self.port

    async def start(self) -> None:
        await self.server.start()
        await self.health.set(LIVENESS_SERVICE, health_pb2.HealthCheckResponse.SERVING)

    def _loaded(self) -> list[str]:
        """The gRPC names of the services serving now."""
        return [h.spec.grpc_service_name for h in self.services if h.ready]

    async def set_serving(self, serving: bool) -> None:
        """Health as the server and its services are: "" and the protocol's services
        while `serving` and every service to be loaded is; each service while `serving`
        and it is loaded (model control)."""
        def status(ok: bool) -> int:
            return (health_pb2.HealthCheckResponse.SERVING if ok
                    else health_pb2.HealthCheckResponse.NOT_SERVING)

        ready = serving and all(h.ready for h in self.services if h.wanted)
        await self.health.set("", status(ready))
        for name in self._extra:
            await self.health.set(name, status(ready))
        for service in self.services:
            await self.health.set(service.spec.grpc_service_name,
                                  status(serving and service.ready))

    async def stop(self, grace: float | None) -> None:
        await self.server.stop(grace)
