"""Server reflection, `grpc.reflection.v1` and `v1alpha`, over the service's own pool.

grpcio-reflection implements only `v1alpha`, while current grpcurl, grpc-go, Postman and
Kreya ask for `v1` first. The two are the same messages under another package name, so
one servicer answers both: requests of either are parsed with the v1alpha classes (the
wire form is identical) and the answers serialised the same way.

What it serves beyond grpcio-reflection's servicer:
- files whole, with their SourceCodeInfo, where the server holds them (the generated
  service file): `grpcurl describe` then shows each API's docstring, and the Python
  client reads it for `list_apis()`. protobuf's `FileDescriptor.CopyToProto`, which
  grpcio-reflection uses, drops the comments;
- the `google.rpc` status and error-detail files, and `grpc/reflection/v1`: a tool that
  finds `type.googleapis.com/google.rpc.BadRequest` in a status' details (every
  INVALID_ARGUMENT carries one) looks the type up here to print its fields.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import FileDescriptor
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2 as rpb

V1ALPHA = "grpc.reflection.v1alpha.ServerReflection"
V1 = "grpc.reflection.v1.ServerReflection"
_METHOD = "ServerReflectionInfo"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def v1_file_proto() -> descriptor_pb2.FileDescriptorProto:
    """grpc/reflection/v1/reflection.proto, made from the v1alpha file it renames."""
    fp = descriptor_pb2.FileDescriptorProto()
    rpb.DESCRIPTOR.CopyToProto(fp)
    old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
    fp.name, fp.package = _V1_FILE, "grpc.reflection.v1"
    fp.ClearField("options")
    for msg in fp.message_type:
        for fd in msg.field:
            if fd.type_name:
                fd.type_name = fd.type_name.replace(old, new)
    for svc in fp.service:
        for method in svc.method:
            method.input_type = method.input_type.replace(old, new)
            method.output_type = method.output_type.replace(old, new)
    return fp


def _add(pool: descriptor_pool.DescriptorPool, fp: descriptor_pb2.FileDescriptorProto
         ) -> None:
    try:
        pool.FindFileByName(fp.name)
    except KeyError:
        pool.Add(fp)


def add_file(pool: descriptor_pool.DescriptorPool, fd: FileDescriptor) -> None:
    """Add a file (a compiled module's, another pool's) to `pool`, after the files it
    imports; a file `pool` has already is left as it is."""
    for dep in fd.dependencies:
        add_file(pool, dep)
    fp = descriptor_pb2.FileDescriptorProto()
    fd.CopyToProto(fp)
    _add(pool, fp)


def add_infra_files(pool: descriptor_pool.DescriptorPool) -> None:
    """Health, both reflection versions and the google.rpc status files join `pool`,
    so that reflection can describe every service listed and every error detail sent."""
    for module in (health_pb2, rpb, status_pb2, error_details_pb2):
        add_file(pool, module.DESCRIPTOR)
    _add(pool, v1_file_proto())


class ReflectionServicer:
    """Answers `ServerReflectionInfo` of either version from one descriptor pool."""

    def __init__(self, pool: descriptor_pool.DescriptorPool,
                 services: Iterable[str] | Callable[[], Iterable[str]],
                 whole_files: Mapping[str, bytes] = {}) -> None:
        self.pool = pool
        #: The services listed: fixed, or asked each time (they follow model control).
        self._services = services if callable(services) else tuple(sorted(services))
        #: file name -> the serialised FileDescriptorProto to send as is (comments kept)
        self.whole_files = dict(whole_files)

    @property
    def services(self) -> tuple[str, ...]:
        """The service names listed now, sorted."""
        if callable(self._services):
            return tuple(sorted(self._services()))
        return self._services

    def _serialised(self, fd: FileDescriptor) -> bytes:
        whole = self.whole_files.get(fd.name)
        if whole is not None:
            return whole
        fp = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(fp)
        return fp.SerializeToString()

    def _files(self, fd: FileDescriptor, request: Any) -> Any:
        """The file and everything it imports (the requested file first)."""
        seen: dict[str, FileDescriptor] = {}

        def walk(f: FileDescriptor) -> None:
            seen[f.name] = f
            for dep in f.dependencies:
                if dep.name not in seen:
                    walk(dep)

        walk(fd)
        return rpb.ServerReflectionResponse(
            file_descriptor_response=rpb.FileDescriptorResponse(
                file_descriptor_proto=[self._serialised(f) for f in seen.values()]),
            original_request=request)

    @staticmethod
    def _error(request: Any, code: grpc.StatusCode) -> Any:
        return rpb.ServerReflectionResponse(
            error_response=rpb.ErrorResponse(error_code=code.value[0],
                                             error_message=code.value[1]),
            original_request=request)

    def answer(self, request: Any) -> Any:
        """The response to one reflection request."""
        pool = self.pool
        which = request.WhichOneof("message_request")
        try:
            if which == "file_by_filename":
                return self._files(pool.FindFileByName(request.file_by_filename), request)
            if which == "file_containing_symbol":
                return self._files(pool.FindFileContainingSymbol(
                    request.file_containing_symbol), request)
            if which == "file_containing_extension":
                ask = request.file_containing_extension
                ext = pool.FindExtensionByNumber(
                    pool.FindMessageTypeByName(ask.containing_type), ask.extension_number)
                return self._files(ext.file, request)
            if which == "all_extension_numbers_of_type":
                msg = pool.FindMessageTypeByName(request.all_extension_numbers_of_type)
                numbers = sorted(e.number for e in pool.FindAllExtensions(msg))
                return rpb.ServerReflectionResponse(
                    all_extension_numbers_response=rpb.ExtensionNumberResponse(
                        base_type_name=msg.full_name, extension_number=numbers),
                    original_request=request)
            if which == "list_services":
                return rpb.ServerReflectionResponse(
                    list_services_response=rpb.ListServiceResponse(
                        service=[rpb.ServiceResponse(name=s) for s in self.services]),
                    original_request=request)
        except KeyError:
            return self._error(request, grpc.StatusCode.NOT_FOUND)
        return self._error(request, grpc.StatusCode.INVALID_ARGUMENT)

    async def info(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
                   ) -> AsyncIterator[Any]:
        async for request in requests:
            yield self.answer(request)

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        """One generic handler per reflection version, both on this servicer."""
        method = grpc.stream_stream_rpc_method_handler(
            self.info, request_deserializer=rpb.ServerReflectionRequest.FromString,
            response_serializer=rpb.ServerReflectionResponse.SerializeToString)
        return [grpc.method_handlers_generic_handler(name, {_METHOD: method})
                for name in (V1, V1ALPHA)]
