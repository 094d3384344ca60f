"""The Open Inference Protocol over gRPC: `inference.GRPCInferenceService` on the
service's own grpc.aio server.

`ServerLive`, `ServerReady`, `ModelReady`, `ServerMetadata`, `ModelMetadata`,
`ModelInfer`, Triton's `ModelStreamInfer` (`tensorwire.v2.stream_infer`: requests
answered in order, errors in-band as `error_message`, decoupled models for generator
and streamed-input APIs), Triton's `ModelConfig` and `ModelStatistics` (the same
documents as over HTTP, `tensorwire.v2.config` and `tensorwire.v2.statistics`) and
the model repository's `RepositoryIndex`, `RepositoryModelLoad` and
`RepositoryModelUnload` (`tensorwire.runtime.control`) and Triton's
`SystemSharedMemoryStatus|Register|Unregister`, with inputs and outputs in regions
(`tensorwire.v2.shm_regions`, off unless `--shared-memory system`); the rpcs of the
extensions tensorwire does not serve answer UNIMPLEMENTED naming theirs
(`tensorwire.v2.unsupported`).
Messages travel as bytes and are parsed here, so a malformed one is INVALID_ARGUMENT
rather than grpc's opaque INTERNAL. Inputs come as typed `contents` or
`raw_input_contents` (never both: Triton's rule), big raw inputs as views of the
received buffer (`framing`); outputs always go back as `raw_output_contents`, which is
what tritonclient reads.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from .. import inference as pb
from ..codecs.v2_facet import Tensor
from ..errors import InternalError, InvalidArgument, TensorwireError
from ..grpc.call_envelope import GrpcEnvelope, GrpcRoute
from ..grpc.call_failures import abort
from ..runtime.plan import RequestPlan
from ..wire.oip import (
    arrays_from_infer_request,
    params_from_proto,
    params_to_proto,
    raw_from_array,
)
from .infer_call import InferCall
from .model import PLATFORM, V2Model
from .raw_contents import SPLIT_MIN, join_raw_outputs, length_delimited, split_raw_inputs
from .repository import Repository
from .shm_regions import Written, in_decoupled
from .stream_infer import FINAL, TritonStream
from .unsupported import BY_RPC, Extension

log = logging.getLogger("tensorwire.v2")

#: `ModelStreamInferResponse.infer_response`.
_STREAM_INFER_RESPONSE = 2


def _parse(cls: Any, data: bytes) -> Any:
    try:
        return cls.FromString(data)
    except DecodeError as exc:
        raise InvalidArgument(f"malformed {cls.DESCRIPTOR.name}: {exc}") from None


class V2Servicer:
    """The handlers of `inference.GRPCInferenceService`, over one Repository."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        #: Each model's `ModelInfer`, and its answers within Triton's stream.
        self.routes: dict[str, GrpcRoute] = {}
        self.stream_routes: dict[str, GrpcRoute] = {}
        self.envelope: GrpcEnvelope | None = None

    def handler(self, envelope: GrpcEnvelope) -> grpc.GenericRpcHandler:
        """One generic handler for the whole service (bytes in, bytes out); inference
        goes through the server's one envelope, as the native methods do."""
        self.envelope = envelope
        models = self.repository.models.items()
        self.routes = {name: envelope.route(model_route(
            self.repository, model, self.repository.plan(name))) for name, model in models}
        self.stream_routes = {name: envelope.route(model_route(
            self.repository, model, self.repository.plan(name), streamed=True))
            for name, model in models}
        unary = grpc.unary_unary_rpc_method_handler
        methods = {
            "ServerLive": unary(self._small(pb.ServerLiveRequest, self.server_live)),
            "ServerReady": unary(self._small(pb.ServerReadyRequest, self.server_ready)),
            "ModelReady": unary(self._small(pb.ModelReadyRequest, self.model_ready)),
            "ServerMetadata": unary(self._small(pb.ServerMetadataRequest,
                                                self.server_metadata)),
            "ModelMetadata": unary(self._small(pb.ModelMetadataRequest,
                                               self.model_metadata)),
            "ModelConfig": unary(self._small(pb.ModelConfigRequest, self.model_config)),
            "ModelStatistics": unary(self._small(pb.ModelStatisticsRequest,
                                                 self.model_statistics)),
            "ModelInfer": unary(self.model_infer),
            "ModelStreamInfer": grpc.stream_stream_rpc_method_handler(self.model_stream_infer),
            "RepositoryIndex": unary(self._small(pb.RepositoryIndexRequest,
                                                 self.repository_index)),
            "RepositoryModelLoad": unary(self._small(pb.RepositoryModelLoadRequest,
                                                       self.model_load)),
            "RepositoryModelUnload": unary(self._small(pb.RepositoryModelUnloadRequest,
                                                         self.model_unload)),
            "SystemSharedMemoryStatus": unary(self._small(
                pb.SystemSharedMemoryStatusRequest, self.shm_status)),
            "SystemSharedMemoryRegister": unary(self._small(
                pb.SystemSharedMemoryRegisterRequest, self.shm_register)),
            "SystemSharedMemoryUnregister": unary(self._small(
                pb.SystemSharedMemoryUnregisterRequest, self.shm_unregister)),
            "CudaSharedMemoryStatus": unary(self._small(
                pb.CudaSharedMemoryStatusRequest, self.cuda_status)),
            "CudaSharedMemoryUnregister": unary(self._small(
                pb.CudaSharedMemoryUnregisterRequest, self.cuda_unregister)),
        }
        for rpc, extension in BY_RPC.items():  # UNIMPLEMENTED, naming the extension
            methods[rpc] = unary(self._refusing(extension))
        return grpc.method_handlers_generic_handler(pb.SERVICE_NAME, methods)

    async def model_load(self, request: Any) -> Any:
        for key in request.parameters:
            if key == "config" or key.startswith("file:"):
                raise InvalidArgument(f"load parameter {key!r} is not supported: tensorwire "
                                      "loads a service as the server was started with it")
        await self.repository.load(request.model_name)
        return pb.RepositoryModelLoadResponse()

    async def model_unload(self, request: Any) -> Any:
        await self.repository.unload(request.model_name)
        return pb.RepositoryModelUnloadResponse()

    @staticmethod
    def _refusing(extension: Extension) -> Any:
        async def refuse(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            await abort(context, extension.refusal(), None)
            raise AssertionError("unreachable: abort raises")

        return refuse

    # ------------------------------------------------------------------ small calls
    def _small(self, request_cls: Any, answer: Callable[[Any], Any]) -> Any:
        """A unary handler: parse, answer (a message, or an awaitable of one: a
        model-control change), serialise; errors as status."""

        async def handle(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            try:
                reply = answer(_parse(request_cls, data))
                if inspect.isawaitable(reply):
                    reply = await reply
                return reply.SerializeToString()
            except TensorwireError as exc:
                await abort(context, exc, None)
                raise  # unreachable: abort raises
            except Exception:
                log.exception("v2 %s failed", request_cls.DESCRIPTOR.name)
                await abort(context, InternalError(), None)
                raise  # unreachable: abort raises

        return handle

    def server_live(self, _: Any) -> Any:
        return pb.ServerLiveResponse(live=self.repository.live)

    def server_ready(self, _: Any) -> Any:
        return pb.ServerReadyResponse(ready=self.repository.ready)

    def model_ready(self, request: Any) -> Any:
        model = self.repository.model(request.name, request.version)
        return pb.ModelReadyResponse(ready=self.repository.model_ready(model))

    def server_metadata(self, _: Any) -> Any:
        meta = self.repository.server_metadata()
        return pb.ServerMetadataResponse(name=meta["name"], version=meta["version"],
                                         extensions=meta["extensions"])

    def model_metadata(self, request: Any) -> Any:
        model = self.repository.model(request.name, request.version)
        out = pb.ModelMetadataResponse(name=model.name, versions=[model.version],
                                       platform=PLATFORM)
        for target, tensors in ((out.inputs, model.inputs), (out.outputs, model.outputs)):
            for t in tensors:
                target.add(name=t.name, datatype=t.datatype, shape=list(t.shape))
        return out

    def model_config(self, request: Any) -> Any:
        config = self.repository.config(request.name, request.version)
        return pb.ModelConfigResponse(config=json_format.ParseDict(config, pb.ModelConfig()))

    def model_statistics(self, request: Any) -> Any:
        stats = self.repository.statistics(request.name, request.version)
        return json_format.ParseDict(stats, pb.ModelStatisticsResponse())

    def repository_index(self, request: Any) -> Any:
        entries = self.repository.index()
        if request.ready:
            entries = [e for e in entries if e["state"] == "READY"]
        return pb.RepositoryIndexResponse(models=entries)

    # ------------------------------------------------------------------ shared memory
    def shm_status(self, request: Any) -> Any:
        regions = self.repository.shared_memory.status(request.name)
        return pb.SystemSharedMemoryStatusResponse(regions={r["name"]: r for r in regions})

    def shm_register(self, request: Any) -> Any:
        self.repository.shared_memory.register(request.name, request.key, request.offset,
                                               request.byte_size)
        return pb.SystemSharedMemoryRegisterResponse()

    def shm_unregister(self, request: Any) -> Any:
        self.repository.shared_memory.unregister(request.name)
        return pb.SystemSharedMemoryUnregisterResponse()

    def cuda_status(self, request: Any) -> Any:
        self.repository.shared_memory.cuda_status(request.name)  # none, or NotFound
        return pb.CudaSharedMemoryStatusResponse()

    def cuda_unregister(self, request: Any) -> Any:
        self.repository.shared_memory.cuda_unregister(request.name)
        return pb.CudaSharedMemoryUnregisterResponse()

    # ------------------------------------------------------------------ infer
    def parse(self, data: bytes) -> tuple[Any, Any, V2Model]:
        """(request, its raw inputs or None, its model); the raw inputs of a big
        request are cut out before parsing, as views of `data`."""
        try:
            head, raw = split_raw_inputs(data)
        except ValueError as exc:
            raise InvalidArgument(f"malformed ModelInferRequest: {exc}") from None
        request = _parse(pb.ModelInferRequest, head)
        return request, raw, self.repository.model(request.model_name,
                                                   request.model_version)

    async def model_infer(self, data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            request, raw, model = self.parse(data)
        except TensorwireError as exc:  # before admission: no metric for unknown names
            await abort(context, exc, None)
            raise  # unreachable: abort raises
        assert self.envelope is not None
        return await self.envelope.unary(self.routes[model.name], data, context,
                                         InferCall(request, raw))

    async def model_stream_infer(self, requests: AsyncIterator[bytes],
                                 context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        """Triton's stream (`tensorwire.v2.stream_infer`)."""
        async for answer in TritonStream(self, requests, context).responses():
            yield answer

    # ------------------------------------------------------------------ in the stream
    @staticmethod
    def inband(err: TensorwireError) -> bytes:
        """A failed request (or call) of Triton's stream, as its answer."""
        return _inband(err)

    def chunk_route(self, model: V2Model, final: bool | None) -> GrpcRoute:
        """A generator API's request in Triton's stream: one answer per chunk
        (`final`: Triton's `triton_final_response` on each, None for none)."""
        assert self.envelope is not None
        return self.envelope.route(model_route(
            self.repository, model, self.repository.plan(model.name), streamed=True,
            final=final))

    def answer(self, model: V2Model, request: Any, result: Any, final: bool | None
               ) -> bytes:
        """One answer of Triton's stream to `request`: the result's requested outputs."""
        out = encode_response(model, request.id, self.repository.outputs(
            model, result, [o.name for o in request.outputs]),
            None if final is None else {FINAL: final})
        return length_delimited(_STREAM_INFER_RESPONSE, out)

    @staticmethod
    def final_answer(model: V2Model, request_id: str) -> bytes:
        """The empty answer that ends a decoupled call's answers."""
        return length_delimited(_STREAM_INFER_RESPONSE,
                                encode_response(model, request_id, [], {FINAL: True}))


def model_route(repository: Repository, model: V2Model, plan: RequestPlan,
                streamed: bool = False, final: bool | None = None) -> GrpcRoute:
    """How one v2 model's `ModelInfer` reads and writes, over its API's plan
    (`streamed`: in Triton's stream, its answer framed as a `ModelStreamInferResponse`,
    with `final` as `triton_final_response` unless None)."""
    params = None if final is None else {FINAL: final}
    shared = repository.shared_memory

    def read(call: InferCall, scope: Any) -> dict[str, Any]:
        request = call.request
        given = {i.name: params_from_proto(i.parameters) for i in request.inputs}
        placed = call.placed = shared.place(
            ((i.name, i.datatype, i.shape, given[i.name], i.HasField("contents"))
             for i in request.inputs),
            ((o.name, params_from_proto(o.parameters)) for o in request.outputs))
        if placed is not None and model.decoupled:
            raise in_decoupled(model.name)
        arrays = arrays_from_infer_request(request, call.raw,
                                           placed.inputs if placed is not None else ())
        if placed is not None:
            arrays.update(placed.inputs)
        inputs = {i.name: Tensor(i.name, arrays[i.name], given[i.name])
                  for i in request.inputs}
        return repository.decode(model, inputs, [o.name for o in request.outputs], scope,
                                 stream=streamed)

    def write(result: Any, call: InferCall) -> bytes:
        request = call.request
        outputs = repository.outputs(model, result, [o.name for o in request.outputs])
        written = call.placed.write(outputs) if call.placed is not None else None
        out = encode_response(model, request.id, outputs, params, written)
        return length_delimited(_STREAM_INFER_RESPONSE, out) if streamed else out

    return GrpcRoute(model.name, plan, read, write, what=f"v2 {model.name}", timed=True,
                     writes_per_request=True)


def _inband(err: TensorwireError) -> bytes:
    """A failed request of Triton's stream: its error as the response's message."""
    return pb.ModelStreamInferResponse(error_message=err.message).SerializeToString()


def encode_response(model: V2Model, request_id: str, outputs: list[Tensor],
                    parameters: dict[str, Any] | None = None,
                    written: Mapping[str, Written] | None = None) -> bytes:
    """A `ModelInferResponse`: every output's bytes in `raw_output_contents`
    (`parameters`: the response's own, Triton's final flag), but for the outputs
    `written` to shared memory: an empty entry (tritonclient finds an output's bytes
    by its position), their parameters naming the region, as Triton answers."""
    response = pb.ModelInferResponse(model_name=model.name, model_version=model.version,
                                     id=request_id)
    if parameters:
        params_to_proto(response.parameters, parameters)
    payloads: list[Any] = []
    for t in outputs:
        placed = written.get(t.name) if written else None
        if placed is None:
            datatype, shape, data = raw_from_array(t.array)
        else:
            datatype, shape, data = placed.datatype, placed.shape, b""
        out = response.outputs.add(name=t.name, datatype=datatype, shape=shape)
        if t.parameters or placed:
            params_to_proto(out.parameters, {**t.parameters,
                                             **(placed.parameters if placed else {})})
        payloads.append(data)
    if sum(memoryview(p).nbytes for p in payloads) < SPLIT_MIN:
        response.raw_output_contents.extend(bytes(p) for p in payloads)
        return response.SerializeToString()
    return join_raw_outputs(response.SerializeToString(), payloads)
