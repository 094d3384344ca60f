"""gRPC bearer auth: a server interceptor checking the `authorization` metadata.

Installed only when a token is configured. It covers every service on the server (the
API, reflection and, unless `auth_open_health`, grpc.health.v1). A refused call gets
UNAUTHENTICATED from a handler of the method's own kind (unary or streaming), so the
client sees a clean status whatever the method. A method the server does not have is
refused the same way: answering UNIMPLEMENTED before auth would let a caller without a
token map the API (HTTP answers 401 for unknown paths too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import grpc

from ..settings import Settings
from .bearer import GRPC_HEALTH_SERVICE, BearerAuth

log = logging.getLogger("tensorwire.grpc")


def interceptors(settings: Settings) -> list[grpc.aio.ServerInterceptor]:
    """The interceptors the settings ask for (bearer auth), for `GrpcServer`."""
    if not settings.auth_token:
        return []
    open_services = [GRPC_HEALTH_SERVICE] if settings.auth_open_health else []
    return [BearerInterceptor(BearerAuth(settings.auth_token), open_services)]


class BearerInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, auth: BearerAuth, open_services: Iterable[str] = ()) -> None:
        self.auth = auth
        self.open_services = frozenset(open_services)
        self.message = auth.refusal().message

    async def intercept_service(self, continuation, details: grpc.HandlerCallDetails):
        service = details.method.rsplit("/", 2)[-2] if details.method else ""
        if service in self.open_services:
            return await continuation(details)
        offered = None
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                offered = value if isinstance(value, str) else None
                break
        if self.auth.allows(offered):
            return await continuation(details)
        log.info("refused unauthenticated gRPC call to %s", details.method)
        handler = await continuation(details)
        return self._refusing(handler)

    def _refusing(self, handler: grpc.RpcMethodHandler | None) -> grpc.RpcMethodHandler:
        """A handler answering UNAUTHENTICATED; of the method's kind when it exists.

        For an unknown method (`handler` None) it is a bidirectional-streaming one: it
        aborts before reading any request, which every kind of call reads as the status.
        """
        message = self.message

        async def refuse_unary(request, context: grpc.aio.ServicerContext):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        async def refuse_streaming(request, context: grpc.aio.ServicerContext):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)
            yield  # pragma: no cover - abort raises; this makes it a generator

        if handler is None or (handler.request_streaming and handler.response_streaming):
            return grpc.stream_stream_rpc_method_handler(refuse_streaming)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(refuse_unary)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(refuse_streaming)
        return grpc.unary_unary_rpc_method_handler(refuse_unary)
