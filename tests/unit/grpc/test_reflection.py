"""`tensorwire.grpc.reflection`: one servicer answering reflection v1 and v1alpha from the
service's own descriptor pool, called directly (each request kind, the files it sends
and in what order, its errors), and the v1 file made from the v1alpha one."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import AsyncIterator
from typing import cast

import grpc
import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2 as rpb

import tensorwire
from tensorwire.grpc import reflection
from tensorwire.grpc.reflection import V1, V1ALPHA, ReflectionServicer
from tensorwire.protobuf.descriptors import ServiceProto, service_proto


@tensorwire.service
class Reflected:
    @tensorwire.api
    def scale(self, x: np.ndarray, factor: float = 2.0) -> np.ndarray:
        """Multiply a tensor."""
        return x * factor


def _proto() -> ServiceProto:
    proto = service_proto(tensorwire.get_service_spec(Reflected))
    reflection.add_infra_files(proto.pool)
    return proto


def _servicer(proto: ServiceProto, whole: bool = True) -> ReflectionServicer:
    files = {proto.file_name: proto.file_proto.SerializeToString()} if whole else {}
    return ReflectionServicer(proto.pool, [proto.spec.grpc_service_name, V1ALPHA, V1], files)


def _names(reply: rpb.ServerReflectionResponse) -> list[str]:
    return [descriptor_pb2.FileDescriptorProto.FromString(b).name
            for b in reply.file_descriptor_response.file_descriptor_proto]


def test_the_v1_file_is_the_v1alpha_file_renamed() -> None:
    fp = reflection.v1_file_proto()
    assert (fp.name, fp.package) == ("grpc/reflection/v1/reflection.proto",
                                     "grpc.reflection.v1")
    assert not fp.HasField("options")  # v1alpha's java package and deprecation
    assert b"v1alpha" not in fp.SerializeToString()
    [service] = fp.service
    assert service.name == "ServerReflection"
    assert service.method[0].output_type == ".grpc.reflection.v1.ServerReflectionResponse"
    pool = descriptor_pool.DescriptorPool()
    reflection.add_infra_files(pool)
    assert pool.FindServiceByName(V1).methods[0].name == "ServerReflectionInfo"
    assert pool.FindServiceByName(V1ALPHA).methods[0].name == "ServerReflectionInfo"


def test_the_infra_files_join_a_pool_once() -> None:
    pool = descriptor_pool.DescriptorPool()
    reflection.add_infra_files(pool)
    reflection.add_infra_files(pool)  # a second server on the same pool: no conflict
    for name in ("grpc.health.v1.Health", V1, V1ALPHA):
        assert pool.FindServiceByName(name)
    for name in ("google.rpc.Status", "google.rpc.BadRequest"):
        assert pool.FindMessageTypeByName(name)


def test_list_services_is_sorted_and_echoes_the_request() -> None:
    proto = _proto()
    request = rpb.ServerReflectionRequest(host="h", list_services="")
    reply = _servicer(proto).answer(request)
    assert [s.name for s in reply.list_services_response.service] == sorted(
        [proto.spec.grpc_service_name, V1ALPHA, V1])
    assert reply.original_request == request


def test_a_file_comes_first_then_everything_it_imports() -> None:
    proto = _proto()
    reply = _servicer(proto).answer(rpb.ServerReflectionRequest(
        file_containing_symbol=proto.spec.grpc_service_name))
    names = _names(reply)
    assert names[0] == proto.file_name
    assert "tensorwire/v1/types.proto" in names
    assert "google/protobuf/descriptor.proto" in names  # what types.proto extends
    assert len(names) == len(set(names))


def test_the_service_file_is_sent_whole_with_its_comments() -> None:
    proto = _proto()
    request = rpb.ServerReflectionRequest(file_by_filename=proto.file_name)
    whole = _servicer(proto, whole=True).answer(request)
    sent = descriptor_pb2.FileDescriptorProto.FromString(
        whole.file_descriptor_response.file_descriptor_proto[0])
    assert " Multiply a tensor.\n" in [loc.leading_comments
                                       for loc in sent.source_code_info.location]
    copied = _servicer(proto, whole=False).answer(request)  # what the pool alone keeps
    sent = descriptor_pb2.FileDescriptorProto.FromString(
        copied.file_descriptor_response.file_descriptor_proto[0])
    assert not sent.source_code_info.location


def test_extensions_are_found_by_number_and_listed() -> None:
    proto = _proto()
    servicer = _servicer(proto)
    reply = servicer.answer(rpb.ServerReflectionRequest(
        all_extension_numbers_of_type="google.protobuf.FieldOptions"))
    numbers = reply.all_extension_numbers_response
    assert numbers.base_type_name == "google.protobuf.FieldOptions"
    assert {50701, 50702, 50703, 50704} <= set(numbers.extension_number)
    assert list(numbers.extension_number) == sorted(numbers.extension_number)
    reply = servicer.answer(rpb.ServerReflectionRequest(
        file_containing_extension=rpb.ExtensionRequest(
            containing_type="google.protobuf.FieldOptions", extension_number=50701)))
    assert _names(reply)[0] == "tensorwire/v1/types.proto"


@pytest.mark.parametrize("request_", [
    rpb.ServerReflectionRequest(file_by_filename="no/such.proto"),
    rpb.ServerReflectionRequest(file_containing_symbol="no.such.Symbol"),
    rpb.ServerReflectionRequest(all_extension_numbers_of_type="no.such.Message"),
    rpb.ServerReflectionRequest(file_containing_extension=rpb.ExtensionRequest(
        containing_type="google.protobuf.FieldOptions", extension_number=1)),
])
def test_what_the_pool_lacks_is_not_found(request_: rpb.ServerReflectionRequest) -> None:
    reply = _servicer(_proto()).answer(request_)
    assert reply.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert reply.original_request == request_


def test_a_request_that_asks_nothing_is_invalid() -> None:
    reply = _servicer(_proto()).answer(rpb.ServerReflectionRequest(host="h"))
    assert reply.error_response.error_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]


async def test_one_answer_per_request_of_the_stream() -> None:
    servicer = _servicer(_proto())

    async def requests() -> AsyncIterator[rpb.ServerReflectionRequest]:
        yield rpb.ServerReflectionRequest(list_services="")
        yield rpb.ServerReflectionRequest(file_containing_symbol="no.such.Symbol")

    context = cast(grpc.aio.ServicerContext, None)  # info asks nothing of it
    replies = [r async for r in servicer.info(requests(), context)]
    assert [r.WhichOneof("message_response") for r in replies] == [
        "list_services_response", "error_response"]


Details = namedtuple("Details", ["method", "invocation_metadata"])


def test_both_versions_are_served_by_the_one_servicer() -> None:
    servicer = _servicer(_proto())
    handlers = servicer.handlers()
    for version in (V1, V1ALPHA):
        found = [h.service(Details(f"/{version}/ServerReflectionInfo", ()))
                 for h in handlers]
        [method] = [m for m in found if m is not None]
        assert method.request_streaming and method.response_streaming
        assert method.request_deserializer == rpb.ServerReflectionRequest.FromString
        assert method.stream_stream == servicer.info
    assert all(h.service(Details(f"/{V1}/Other", ())) is None for h in handlers)
