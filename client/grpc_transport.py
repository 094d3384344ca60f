"""The gRPC transport (grpc.aio): a small channel pool per client, APIs from reflection.

Discovery uses grpcio-reflection's `ProtoReflectionDescriptorDatabase` behind a fresh
`DescriptorPool`, so the request/response classes are built from exactly what the
server describes (no generated code, no .proto on the client). Each rpc becomes an API
named like the server's method (`Summarize` -> `summarize`); a request is filled
field by field by the input kinds, a response read back into Python by the output kind
(a `result` field is the output itself; other responses are the output model's fields).
A root-input API is told by its rpc's `option (tensorwire.v1.root_input) = true;`.
Calls go out over a `ChannelPool` (`channels=`, see `tensorwire.client.channels`): each
to the least busy of a few connections, so several workers or pods share one client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from .. import v1 as tw_types
from ..errors import (
    ERROR_KIND_HEADER,
    ClientError,
    ClientTimeout,
    NotFound,
    ServerUnreachable,
    TensorwireError,
    error_from_grpc,
)
from ..naming import snake
from ..wire.status import violations_from_status
from . import tracecontext
from .api import RemoteAPI, RemoteField
from .channels import DEFAULT_CHANNELS, ChannelPool, check_size
from .filedata import ClientFiles
from .jsonkinds import fields_summary
from .kinds import field_kind
from .options import RETRYABLE, CallOptions, with_retries
from .protofields import Model
from .protokinds import Violations
from .streams import elements
from .target import Target

#: Services every tensorwire server offers beside the user's own (the Open Inference
#: Protocol's serves the same APIs to tritonclient and KServe; this client calls the
#: service's own contract).
INFRA_SERVICES = frozenset({
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
    "inference.GRPCInferenceService",
})
_MAX_MESSAGE = -1  # the server enforces its own limit (RESOURCE_EXHAUSTED past it)
ROOT_INPUT_OPTION = tw_types.ROOT_INPUT.name  # "root_input", in tensorwire/v1/types.proto


class Output:
    """How a response message maps to the API's output value."""

    def __init__(self, desc: Any) -> None:
        self.model = Model(desc, field_kind)
        names = [f.name for f in desc.fields]
        self.result = self.model.fields[0][1] if names == ["result"] else None
        self.summary = (self.result.summary() if self.result else
                        fields_summary({n: k.summary() for n, k in self.model.fields}))

    def decode(self, msg: Any, files: ClientFiles) -> Any:
        if self.result is not None:
            return self.result.read(msg, "result", files)
        return self.model.decode(msg, files)


def marks_root_inputs(service: Any) -> bool:
    """Whether the service's contract can mark root inputs: its file imports a
    tensorwire/v1/types.proto that declares the `root_input` method option."""
    return any(dep.name == tw_types.PROTO_NAME and ROOT_INPUT_OPTION in dep.extensions_by_name
               for dep in service.file.dependencies)


def _root(method: Any, fields: list[RemoteField], marked: bool) -> bool | None:
    """True for a root-input rpc (`option (tensorwire.v1.root_input) = true;`); None
    where a server that cannot mark one leaves a single-field request ambiguous."""
    if method.has_options and tw_types.is_root_input(method.GetOptions()):
        return True
    return None if not marked and len(fields) == 1 else False


def method_docs(file_proto: Any, service: str) -> dict[str, str]:
    """Method name -> its leading comment in the file's SourceCodeInfo (the API's
    docstring, as the server wrote it: one space after `//`, lines joined)."""
    docs: dict[str, str] = {}
    for si, svc in enumerate(file_proto.service):
        if f"{file_proto.package}.{svc.name}".lstrip(".") != service:
            continue
        for loc in file_proto.source_code_info.location:
            path = list(loc.path)
            if len(path) == 4 and path[:3] == [6, si, 2] and loc.leading_comments:
                text = loc.leading_comments.removesuffix("\n")
                text = text[1:] if text.startswith(" ") else text
                docs[svc.method[path[3]].name] = text.replace("\n ", "\n")
    return docs


def grpc_api(service: Any, method: Any, marked: bool | None = None,
             doc: str | None = None) -> RemoteAPI:
    request = method.input_type
    fields = []
    for fd in request.fields:
        kind = field_kind(fd)
        fields.append(RemoteField(fd.name, kind, kind.summary()))
    output = Output(method.output_type)
    if marked is None:
        marked = marks_root_inputs(service)
    api = RemoteAPI(
        name=snake(method.name), doc=doc, fields=fields,
        root=_root(method, fields, marked),
        stream=bool(getattr(method, "server_streaming", False)), output=output,
        output_summary=output.summary, address=f"/{service.full_name}/{method.name}",
        required=tuple(fd.name for fd in request.fields
                       if fd.has_options and tw_types.field_hints(fd.GetOptions()).required),
        stream_in=bool(getattr(method, "client_streaming", False)),
    )
    api.wire["request_cls"] = message_factory.GetMessageClass(request)
    api.wire["response_cls"] = message_factory.GetMessageClass(method.output_type)
    api.wire["method"] = method.name
    return api


class Requests:
    """A streamed input's request messages, one per element (an element the client
    cannot encode stops the stream; the call then raises its error, not grpc's
    CANCELLED: `error`)."""

    def __init__(self, api: RemoteAPI, values: dict[str, Any], files: ClientFiles) -> None:
        self.api = api
        self.field = api.fields[0].name
        self.elements = elements(values[self.field])
        self.files = files
        self.error: Exception | None = None

    def __aiter__(self) -> Requests:
        return self

    async def __anext__(self) -> Any:
        element = await anext(self.elements)
        try:
            return encode_request(self.api, {self.field: element}, self.files)
        except Exception as exc:
            self.error = exc
            raise

    def failed(self, exc: grpc.RpcError, transport: GrpcTransport, options: CallOptions,
               started: float) -> Exception:
        """What a failed call raises: the client's own error, else the server's."""
        return self.error or transport.error(exc, options, started)

    def raise_own(self) -> None:
        """Inside `except CancelledError`: grpc.aio cancels a call whose request
        iterator raised, and its awaiter sees CancelledError though nobody cancelled
        the caller; raise the element's error then (a real cancel goes on)."""
        task = asyncio.current_task()
        if self.error is not None and (task is None or not task.cancelling()):
            raise self.error from None


def encode_request(api: RemoteAPI, values: dict[str, Any], files: ClientFiles) -> Any:
    """The request message of one call; every input that cannot be encoded is reported
    (in declaration order, as the server's validation would)."""
    msg = api.wire["request_cls"]()
    errors = Violations()
    for field in api.fields:
        if field.name in values:
            errors.run(field.kind.write, msg, field.name, values[field.name], (field.name,),
                       files)
    errors.check()
    return msg


class _Metadata(grpc.UnaryUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the client's metadata (bearer token, headers) to reflection calls."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.metadata = metadata

    def _details(self, details: Any) -> Any:
        return details._replace(metadata=(*(details.metadata or ()), *self.metadata))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)


class GrpcTransport:
    protocol = "grpc"

    def __init__(self, target: Target, *, token: str | None, connect_timeout: float,
                 root_certificates: bytes | None, files: ClientFiles,
                 service: str | None = None, channels: int | None = None) -> None:
        self.target = target
        #: Channels (connections) in the pool: calls spread over them.
        self.size = DEFAULT_CHANNELS if channels is None else check_size(channels)
        self.files = files
        self.connect_timeout = connect_timeout
        self.service_name = service
        self.metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ())
        self._credentials = (grpc.ssl_channel_credentials(root_certificates=root_certificates)
                             if target.secure else None)
        self._options = [("grpc.max_receive_message_length", _MAX_MESSAGE),
                         ("grpc.max_send_message_length", _MAX_MESSAGE)]
        self.channels: ChannelPool | None = None
        self.pool: descriptor_pool.DescriptorPool | None = None

    # ------------------------------------------------------------------ lifecycle
    def _sync_channel(self) -> grpc.Channel:
        if self._credentials is not None:
            return grpc.secure_channel(self.target.grpc_target, self._credentials,
                                       options=self._options)
        return grpc.insecure_channel(self.target.grpc_target, options=self._options)

    def _discover(self, metadata: tuple[tuple[str, str], ...]) -> dict[str, RemoteAPI]:
        """Reflection over a short-lived blocking channel (run in a worker thread)."""
        raw = self._sync_channel()
        try:
            try:
                grpc.channel_ready_future(raw).result(timeout=self.connect_timeout)
            except grpc.FutureTimeoutError:
                raise ServerUnreachable(f"cannot connect to {self.target} within "
                                        f"{self.connect_timeout} s") from None
            channel = grpc.intercept_channel(raw, _Metadata(metadata)) if metadata else raw
            db = ProtoReflectionDescriptorDatabase(channel)
            try:
                services = [s for s in db.get_services() if s not in INFRA_SERVICES]
                name = self._choose(services)
                self.pool = descriptor_pool.DescriptorPool(db)
                service = self.pool.FindServiceByName(name)
                apis: dict[str, RemoteAPI] = {}
                marked = marks_root_inputs(service)
                # The file as served (comments kept: the pool's descriptors drop them).
                docs = method_docs(db.FindFileContainingSymbol(name), name)
                for method in service.methods:
                    api = grpc_api(service, method, marked, docs.get(method.name))
                    apis[api.name] = api
                return apis
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    raise ClientError(f"{self.target} does not offer server reflection, "
                                      "which the client needs to discover its APIs") from None
                raise self.error(exc) from None
        finally:
            raw.close()

    def _choose(self, services: list[str]) -> str:
        if self.service_name is not None:
            if self.service_name not in services:
                raise NotFound(f"{self.target} has no service {self.service_name!r}; it "
                               f"serves: {', '.join(services) or 'none'}")
            return self.service_name
        if len(services) != 1:
            raise ClientError(f"{self.target} serves {len(services)} services "
                              f"({', '.join(services) or 'none'}): pass service=... to "
                              "choose one")
        return services[0]

    async def connect(self, options: CallOptions) -> dict[str, RemoteAPI]:
        metadata = self._metadata(options)
        apis = await with_retries(
            options, lambda: asyncio.to_thread(self._discover, metadata))
        self.channels = ChannelPool(self.target.grpc_target, self.size,
                                    options=self._options, credentials=self._credentials,
                                    metadata=metadata)
        await self.channels.start(self.connect_timeout)
        for api in apis.values():
            api.wire["callables"] = self.channels.multicallables(
                api.address, stream=api.stream, stream_in=api.stream_in,
                request_serializer=_serialize,
                response_deserializer=api.wire["response_cls"].FromString)
        return apis

    async def close(self) -> None:
        if self.channels is not None:
            await self.channels.close()
            self.channels = None

    def _metadata(self, options: CallOptions) -> tuple[tuple[str, str], ...]:
        extra = tuple((k.lower(), str(v)) for k, v in options.headers.items())
        return tracecontext.with_context((*self.metadata, *extra))  # the caller's trace

    async def is_ready(self, options: CallOptions) -> bool:
        pool = self.channels
        assert pool is not None
        index = pool.acquire()
        check = pool.channels[index].unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=_serialize,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        try:
            reply = await check(health_pb2.HealthCheckRequest(service=""),
                                timeout=options.timeout or self.connect_timeout,
                                metadata=self._metadata(options))
        except grpc.RpcError:
            return False
        finally:
            pool.release(index)
        return reply.status == health_pb2.HealthCheckResponse.SERVING

    # ------------------------------------------------------------------ calls
    async def call(self, api: RemoteAPI, values: dict[str, Any], options: CallOptions) -> Any:
        if api.stream_in:
            return await self._call_streamed(api, values, options)
        msg = encode_request(api, values, self.files)
        methods = api.wire["callables"]
        metadata = self._metadata(options)
        pool = self.channels
        assert pool is not None

        async def attempt() -> Any:
            started = time.monotonic()
            index = pool.acquire()  # each attempt: the least busy channel now
            try:
                reply = await methods[index](msg, timeout=options.timeout,
                                             metadata=metadata)
            except grpc.RpcError as exc:
                err = self.error(exc, options, started)
                if isinstance(err, RETRYABLE):  # refused unrun: try other channels first
                    pool.avoid(index)
                raise err from None
            finally:
                pool.release(index)
            return api.output.decode(reply, self.files)

        return await with_retries(options, attempt)

    async def _call_streamed(self, api: RemoteAPI, values: dict[str, Any],
                             options: CallOptions) -> Any:
        """A client-streaming call: its elements sent as the iterable gives them (never
        retried: an iterator is read once)."""
        requests = Requests(api, values, self.files)
        pool = self.channels
        assert pool is not None
        started = time.monotonic()
        index = pool.acquire()
        try:
            reply = await api.wire["callables"][index](
                requests, timeout=options.timeout, metadata=self._metadata(options))
        except grpc.RpcError as exc:
            raise requests.failed(exc, self, options, started) from None
        except asyncio.CancelledError:
            requests.raise_own()
            raise
        finally:
            pool.release(index)
        return api.output.decode(reply, self.files)

    async def open_stream(self, api: RemoteAPI, values: dict[str, Any],
                          options: CallOptions) -> AsyncIterator[Any]:
        if api.stream_in:  # bidirectional: requests as the iterable gives them, no retry
            requests = Requests(api, values, self.files)
            return await self._open(api, requests, options, requests)
        msg = encode_request(api, values, self.files)
        return await with_retries(options, lambda: self._open(api, msg, options))

    async def _open(self, api: RemoteAPI, request: Any, options: CallOptions,
                    requests: Requests | None = None) -> _ReplyStream:
        """Start a server-streaming (or bidirectional) call and read its first reply."""
        methods = api.wire["callables"]
        metadata = self._metadata(options)
        pool = self.channels
        assert pool is not None
        started = time.monotonic()
        index = pool.acquire()  # released when the stream ends or is closed
        try:
            call = methods[index](request, timeout=options.timeout, metadata=metadata)
        except BaseException:
            pool.release(index)
            raise
        stream = _ReplyStream(self, api, call, options, started,
                              lambda: pool.release(index), lambda: pool.avoid(index),
                              requests)
        await stream.prime()
        return stream

    def error(self, exc: grpc.RpcError, options: CallOptions | None = None,
              started: float | None = None) -> TensorwireError:
        """An RpcError as the tensorwire error the server raised (or a client error).

        `started`: when the call began (time.monotonic()), to tell the client's own
        deadline from the server's time limit.
        """
        code = exc.code()
        name = code.name if code is not None else "UNKNOWN"
        message = exc.details() or name
        trailing = list(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") \
            else []
        kind = next((v for k, v in trailing if k == ERROR_KIND_HEADER), None)
        if name == "DEADLINE_EXCEEDED" and options is not None and options.timeout and (
                kind is None or started is None
                or time.monotonic() - started >= options.timeout):
            # The client's own deadline travels with the call: once it has passed,
            # whether the server or the client noticed first, it is the client's timeout
            # (as over HTTP). Before it, a DeadlineExceeded the server sent (its error
            # kind in the trailers) is the server's own time limit, --request-timeout,
            # and stays DeadlineExceeded (as the HTTP 504 does).
            return ClientTimeout(f"{self.target} did not answer within {options.timeout} s")
        if kind is None:
            if name == "UNAVAILABLE":
                return ServerUnreachable(f"cannot reach {self.target}: {message}")
            if name == "DEADLINE_EXCEEDED":
                return ClientTimeout(f"{self.target} did not answer in time: {message}")
            if name == "UNIMPLEMENTED":
                return NotFound(f"{self.target} has no such method: {message}")
        detail = _violations(trailing)
        err = error_from_grpc(name, message, detail, kind)
        err.headers.update({k: v for k, v in trailing
                            if isinstance(v, str) and not k.endswith("-bin")})
        err.request_id = err.headers.get("x-request-id")  # type: ignore[attr-defined]
        return err


def _serialize(msg: Any) -> bytes:
    return msg.SerializeToString()


def _violations(trailing: list[tuple[str, Any]]) -> list[Any]:
    for key, value in trailing:
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            try:
                return violations_from_status(status_pb2.Status.FromString(value))
            except Exception:
                return []
    return []


class _ReplyStream:
    """The replies of one server-streaming call; the first is read eagerly (`prime`)."""

    def __init__(self, transport: GrpcTransport, api: RemoteAPI, call: Any,
                 options: CallOptions, started: float,
                 release: Callable[[], None], avoid: Callable[[], None],
                 requests: Requests | None = None) -> None:
        self.transport = transport
        self.options = options
        self.started = started
        self.api = api
        self.call = call
        #: The replies, read through the call's own iterator and not `call.read()`:
        #: `read()` raises as soon as the call holds a status, so when the server ends a
        #: bidirectional call while a request is still being written (the write fails,
        #: and grpc.aio sets a generic INTERNAL status), the replies already received
        #: were dropped and the server's own status replaced; the iterator reads every
        #: received reply first, then raises the status the server sent.
        self._replies = call.__aiter__()
        self.first: Any = None
        self.done = False
        #: Gives the call's channel back to the pool (once: ended, failed or closed).
        self._release: Callable[[], None] | None = release
        #: Tells the pool to pass the channel over (the call was refused unrun).
        self._avoid = avoid
        #: A bidirectional call's requests (an element the client could not encode
        #: is what the call raises).
        self._requests = requests

    def _finish(self) -> None:
        """The call is over (ended, failed or cancelled): give its channel back."""
        self.done = True
        release, self._release = self._release, None
        if release is not None:
            release()

    async def _read(self) -> Any:
        try:
            reply = await anext(self._replies)
        except StopAsyncIteration:
            self._finish()
            return None
        except asyncio.CancelledError:
            if self._requests is not None:
                self._finish()
                self._requests.raise_own()
            raise
        except grpc.RpcError as exc:
            self._finish()
            if self._requests is not None and self._requests.error is not None:
                raise self._requests.error from None
            err = self.transport.error(exc, self.options, self.started)
            if isinstance(err, RETRYABLE):
                self._avoid()
            raise err from None
        return reply

    async def prime(self) -> None:
        self.first = await self._read()

    def __aiter__(self) -> _ReplyStream:
        return self

    async def __anext__(self) -> Any:
        if self.first is not None:
            reply, self.first = self.first, None
        elif self.done:
            raise StopAsyncIteration
        else:
            reply = await self._read()
        if reply is None:
            raise StopAsyncIteration
        return self.api.output.decode(reply, self.transport.files)

    async def aclose(self) -> None:
        if not self.done:
            self._finish()
            self.call.cancel()

    def __del__(self) -> None:
        # a stream dropped unread still gives its channel back
        if getattr(self, "_release", None) is not None:
            self._finish()


