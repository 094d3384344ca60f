"""gRPC transport (grpc.aio): generic handlers over the generated message classes.

Every API's request bytes are parsed here (so a malformed message is INVALID_ARGUMENT,
not grpc's opaque INTERNAL), handed to the same `Decoder.decode_values` the HTTP path
uses, and the result encoded by the API's codec. Health and reflection are served over
the service's private descriptor pool.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import descriptor_pool
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..context import Context, Headers, RequestInfo
from ..contract.decoding import Decoder
from ..errors import TensorwireError
from ..protobuf.descriptors import ServiceProto, locked_service_proto
from ..protobuf.messages import APIMessages
from ..runtime.admission import Ticket
from ..runtime.service import ServiceRuntime
from ..settings import Settings
from ..wire.worker import WORKER_HEADER, WORKERS_HEADER
from . import reflection
from .compiled import compile_stream, compile_unary
from .connections import connection_options
from .failures import abort, failed

log = logging.getLogger("tensorwire.grpc")

#: grpc.health.v1 service name for liveness (Kubernetes: `grpc: {service: liveness}`).
#: It stays SERVING while the process drains; "" and the API service answer readiness
#: and flip to NOT_SERVING on SIGTERM. A liveness probe on "" would restart a pod that
#: is only draining and cut its in-flight requests.
LIVENESS_SERVICE = "liveness"


class GrpcEndpoint:
    """The handlers of one API (unary or server-streaming)."""

    def __init__(self, messages: APIMessages, runtime: ServiceRuntime) -> None:
        self.messages = messages
        self.api = messages.api
        self.decoder = Decoder(messages.api)
        self.runtime = runtime
        self.admission = runtime.admission
        self.tracing = runtime.tracing  # None unless --tracing

    @staticmethod
    def metadata_of(context: grpc.aio.ServicerContext) -> Callable[[], list[tuple[str, str]]]:
        """The call's text metadata, read when first asked for (see `Headers`)."""
        def metadata() -> list[tuple[str, str]]:
            return [(k, v) for k, v in (context.invocation_metadata() or ())
                    if not k.endswith("-bin")]

        return metadata

    def _context(self, context: grpc.aio.ServicerContext) -> Context:
        # Metadata, peer and request id are read lazily (see RequestInfo).
        return self.runtime.context(RequestInfo("grpc", self.api.name,
                                                Headers(self.metadata_of(context)),
                                                context.peer))

    def _decode(self, data: bytes, ctx: Context) -> dict[str, Any]:
        msg = self.messages.parse_request(data)
        # ctx is the decode scope: file codecs store uploads in ctx.temp_dir
        return self.decoder.decode_values(self.messages.request_values(msg, ctx))

    def failed(self, exc: BaseException, request_id: str) -> TensorwireError:
        """`exc` in the error model (logged when it is not the client's fault)."""
        return failed(exc, self.api.name, request_id, log)

    #: End the call with an error's status, details and the request id.
    abort = staticmethod(abort)

    def _error(self, exc: BaseException, ctx: Context) -> TensorwireError:
        return self.failed(exc, ctx.request.id)

    async def _abort(self, context: grpc.aio.ServicerContext, err: TensorwireError,
                     ctx: Context) -> None:
        await self.abort(context, err, ctx.request.id)

    @property
    def handler(self) -> Callable[[bytes, grpc.aio.ServicerContext], Any]:
        """What the method calls: its compiled handler when it has one (see
        `tensorwire.grpc.compiled`), else `unary` or `stream`."""
        if self.api.output.stream:
            return compile_stream(self) or self.stream
        return compile_unary(self) or self.unary

    async def _admit(self, context: grpc.aio.ServicerContext, ctx: Context) -> Ticket:
        try:
            return self.admission.admit("grpc", self.api.name, ctx.request)
        except TensorwireError as exc:  # draining or over the concurrency limit
            ctx.close()
            await self._abort(context, exc, ctx)
            raise  # unreachable: abort raises

    async def _send_headers(self, context: grpc.aio.ServicerContext, ctx: Context) -> None:
        if ctx.response.headers:
            await context.send_initial_metadata(
                [(k.lower(), v) for k, v in ctx.response.headers.items()])

    async def unary(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        ctx = self._context(context)
        try:  # admission inline: no coroutine per request on the happy path
            ticket = self.admission.admit("grpc", self.api.name, ctx.request)
        except TensorwireError as exc:  # draining or over the concurrency limit
            ctx.close()
            await self._abort(context, exc, ctx)
            raise  # unreachable: abort raises
        code, sent = "OK", 0
        span = self.tracing.start(ctx.request) if self.tracing is not None else None
        try:
            kwargs = self._decode(data, ctx)
            if span is not None:
                span.decoded()
            result = await self.runtime.call(self.api, kwargs, ctx, context.time_remaining())
            if span is not None:
                span.encoding()
            out = self.messages.response_bytes(result)
            if ctx.response.headers:
                await self._send_headers(context, ctx)
            sent = len(out)
            return out
        except asyncio.CancelledError:
            code = "CANCELLED"
            ctx.cancel()
            raise
        except grpc.aio.AbortError:
            code = "ABORTED"
            raise
        except Exception as exc:
            err = self._error(exc, ctx)
            code = err.grpc_code
            await self._abort(context, err, ctx)
            raise  # unreachable: abort raises
        finally:
            ctx.close()
            ticket.finish(code, len(data), sent)
            if span is not None:  # after the access line, which reads its trace id
                span.finish(code)

    async def stream(self, data: bytes, context: grpc.aio.ServicerContext):
        ctx = self._context(context)
        ticket = await self._admit(context, ctx)
        code, sent = "OK", 0
        chunks = None
        span = self.tracing.start(ctx.request) if self.tracing is not None else None
        try:
            kwargs = self._decode(data, ctx)
            if span is not None:
                span.decoded()
            chunks = self.runtime.stream(self.api, kwargs, ctx)
            sent_headers = False
            async for chunk in chunks:
                if not sent_headers:
                    await self._send_headers(context, ctx)
                    sent_headers = True
                out = self.messages.response_bytes(chunk)
                sent += len(out)
                yield out
        except asyncio.CancelledError:
            code = "CANCELLED"
            ctx.cancel()
            raise
        except grpc.aio.AbortError:
            code = "ABORTED"
            raise
        except Exception as exc:
            err = self._error(exc, ctx)
            code = err.grpc_code
            await self._abort(context, err, ctx)
        finally:
            if chunks is not None:
                await chunks.aclose()
            ctx.close()
            ticket.finish(code, len(data), sent)
            if span is not None:
                span.finish(code)


def generic_handler(proto: ServiceProto, runtime: ServiceRuntime) -> grpc.GenericRpcHandler:
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for name, messages in proto.messages.items():
        endpoint = GrpcEndpoint(messages, runtime)
        path = proto.method_names[name]
        method = path.rsplit("/", 1)[-1]
        runtime.admission.describe("grpc", name, method, path)
        if messages.api.output.stream:
            handlers[method] = grpc.unary_stream_rpc_method_handler(endpoint.handler)
        else:
            handlers[method] = grpc.unary_unary_rpc_method_handler(endpoint.handler)
    return grpc.method_handlers_generic_handler(proto.spec.grpc_service_name, handlers)


class _Health(health.aio.HealthServicer):
    """grpc.health.v1 whose Check also names the worker holding the connection (see
    `tensorwire.wire.worker`): tensorwire's client spreads its calls by it."""

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
    handler: grpc.GenericRpcHandler
    #: Adds the files that describe it to a descriptor pool (reflection's).
    add_files: Callable[[descriptor_pool.DescriptorPool], None]


class GrpcServer:
    """A grpc.aio server carrying one service, health and reflection (and `extra`
    services beside it)."""

    def __init__(self, runtime: ServiceRuntime, settings: Settings | None = None,
                 interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
                 extra: Sequence[ExtraService] = ()) -> None:
        self.runtime = runtime
        self.settings = settings or runtime.settings
        # Numbered as the published contract says, when serving with --proto-lock.
        self.proto = locked_service_proto(runtime.spec, self.settings.proto_lock)
        self.health = _Health(self.settings.workers)
        options = [
            ("grpc.max_receive_message_length", self.settings.max_request_size),
            ("grpc.max_send_message_length", self.settings.max_response_size),
            ("grpc.so_reuseport", 1 if self.settings.workers > 1 else 0),
            *connection_options(self.settings),
        ]
        self.server = grpc.aio.server(options=options, interceptors=list(interceptors) or None)
        self.server.add_generic_rpc_handlers((generic_handler(self.proto, runtime),
                                              *(e.handler for e in extra)))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        reflection.add_infra_files(self.proto.pool)
        for service in extra:
            service.add_files(self.proto.pool)
        #: What readiness (health "" and each of these) reports.
        self.served = (self.proto.spec.grpc_service_name, *(e.name for e in extra))
        names = (*self.served, health.SERVICE_NAME, reflection.V1, reflection.V1ALPHA)
        self.server.add_generic_rpc_handlers(reflection.ReflectionServicer(
            self.proto.pool, names,
            {self.proto.file_name: self.proto.file_proto.SerializeToString()}).handlers())
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

    async def set_serving(self, serving: bool) -> None:
        status = (health_pb2.HealthCheckResponse.SERVING if serving
                  else health_pb2.HealthCheckResponse.NOT_SERVING)
        await self.health.set("", status)
        for name in self.served:
            await self.health.set(name, status)

    async def stop(self, grace: float | None) -> None:
        await self.server.stop(grace)
