"""The one error model as a gRPC status: code, message and `google.rpc` details.

Validation failures carry a `google.rpc.BadRequest` whose field violations name the
same locations as the HTTP error body (`params.a`, `items.2`), so clients in any
language can point at the bad field.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from ..errors import FieldViolation, InternalError, TensorwireError


def loc_to_field(loc: list[str | int]) -> str:
    return ".".join(str(p) for p in loc)


def field_to_loc(field: str) -> list[str | int]:
    return [int(p) if p.isdigit() else p for p in field.split(".")] if field else []


def to_status(exc: TensorwireError) -> grpc.Status:
    err = exc if exc.public else InternalError()
    code = grpc.StatusCode[err.grpc_code]
    status = status_pb2.Status(code=code.value[0], message=err.message)
    if err.detail:
        bad = error_details_pb2.BadRequest()
        for v in err.detail:
            bad.field_violations.add(field=loc_to_field(v.get("loc", [])),
                                     description=v.get("msg", ""),
                                     reason=str(v.get("type", "")))
        packed = any_pb2.Any()
        packed.Pack(bad)
        status.details.append(packed)
    return rpc_status.to_status(status)


def violations_from_status(status: status_pb2.Status) -> list[FieldViolation]:
    """Field violations from a status' details (client side)."""
    out: list[FieldViolation] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            for v in bad.field_violations:
                out.append({"loc": field_to_loc(v.field), "msg": v.description,
                            "type": v.reason})
    return out
