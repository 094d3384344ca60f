"""Raw gRPC calls for e2e tests, built from the service's own generated descriptors."""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import status_pb2
from grpc_status import rpc_status

from tensorwire.protobuf.descriptors import service_proto
from tensorwire.wire.status import violations_from_status


class GrpcCaller:
    def __init__(self, spec: Any, target: str, channel: grpc.Channel | None = None) -> None:
        self.proto = service_proto(spec)
        self.channel = channel if channel is not None else grpc.insecure_channel(target)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> GrpcCaller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _method(self, api: str, stream: bool):
        messages = self.proto.messages[api]
        path = self.proto.method_names[api]
        make = self.channel.unary_stream if stream else self.channel.unary_unary
        return messages, make(path, request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=messages.response_cls.FromString)

    def request(self, api: str, values: dict[str, Any]) -> Any:
        return self.proto.messages[api].request(values)

    def call(self, api: str, values: dict[str, Any] | None = None, *, raw: Any = None,
             timeout: float = 30, metadata: Any = None) -> Any:
        messages, method = self._method(api, stream=False)
        msg = raw if raw is not None else messages.request(values or {})
        reply = method(msg, timeout=timeout, metadata=metadata)
        return messages.response_value(reply)

    def future(self, api: str, values: dict[str, Any], *, timeout: float = 30) -> grpc.Future:
        """A call in flight (cancel() it to hang up), answering the raw reply message."""
        messages, method = self._method(api, stream=False)
        return method.future(messages.request(values), timeout=timeout)

    def stream(self, api: str, values: dict[str, Any], *, timeout: float = 30,
               metadata: Any = None):
        messages, method = self._method(api, stream=True)
        for reply in method(messages.request(values), timeout=timeout, metadata=metadata):
            yield messages.response_value(reply)

    def streamed(self, api: str, elements: Any, *, timeout: float = 30,
                 metadata: Any = None) -> Any:
        """A streamed-input call: one request message per element of `elements` (an
        iterable of values; raw messages pass as they are). A bidirectional rpc
        answers the grpc call itself (iterate it for replies, `cancel()` it); a
        client-streaming one answers its result."""
        messages = self.proto.messages[api]
        field = messages.api.stream_input.name
        path = self.proto.method_names[api]
        requests = (e if hasattr(e, "SerializeToString") else messages.request({field: e})
                    for e in elements)
        make = (self.channel.stream_stream if messages.api.output.stream
                else self.channel.stream_unary)
        method = make(path, request_serializer=lambda m: m.SerializeToString(),
                      response_deserializer=messages.response_cls.FromString)
        if messages.api.output.stream:
            return method(requests, timeout=timeout, metadata=metadata)
        return messages.response_value(method(requests, timeout=timeout, metadata=metadata))

    def replies(self, api: str, call: Any) -> Any:
        """The values of a bidirectional call's replies, as they come."""
        messages = self.proto.messages[api]
        for reply in call:
            yield messages.response_value(reply)


def error_locs(exc: grpc.RpcError) -> list[list[str | int]]:
    status = rpc_status.from_call(exc)
    if status is None:
        return []
    return [v["loc"] for v in violations_from_status(status)]


def status_of(exc: grpc.RpcError) -> status_pb2.Status | None:
    return rpc_status.from_call(exc)
