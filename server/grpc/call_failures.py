"""How a gRPC call that failed is answered: one home for every servicer (each API's own
and the Open Inference Protocol's), so that status, details, error kind and request id
travel the same way whichever service a client called."""

from __future__ import annotations

import logging

import grpc

from ..errors import ERROR_KIND_HEADER, InternalError, TensorwireError, as_error, error_kind
from ..wire.status import to_status


def failed(exc: BaseException, what: str, request_id: str,
           log: logging.Logger) -> TensorwireError:
    """`exc` in the error model, logged on `log` (naming `what` failed) when it is not
    the client's fault; a private error becomes a plain InternalError."""
    if isinstance(exc, TensorwireError):
        if not exc.public:
            log.error("%s failed [%s]: %s", what, request_id, exc.message)
        return exc if exc.public else InternalError()
    log.error("%s failed [%s]", what, request_id, exc_info=exc)
    return as_error(exc)


async def abort(context: grpc.aio.ServicerContext, err: TensorwireError,
                request_id: str | None) -> None:
    """End the call with `err`'s status, details, error kind and the request id (None:
    the call ended before it had one)."""
    status = to_status(err)
    kind = error_kind(err if err.public else InternalError())
    trailing = (*status.trailing_metadata, (ERROR_KIND_HEADER, kind))
    if request_id is not None:
        trailing = (*trailing, ("x-request-id", request_id))
    await context.abort(status.code, status.details, trailing_metadata=trailing)
