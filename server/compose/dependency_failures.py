"""A dependency's failures as the calling service's: one mapping, in-process or remote.

What a dependency answered says whose problem it is, and the caller's client should
hear it in those terms, whichever way the call went (the caller never knows which):

- it refused its input (400, 406, 413, 415...): 500 / INTERNAL naming it. The
  caller's code sent that input: a bug of the pipeline, not of its client;
- it is overloaded (503 + Retry-After / RESOURCE_EXHAUSTED): 503 Overloaded, the
  Retry-After kept;
- it is not ready, draining, down or unreachable: 503 / UNAVAILABLE naming it;
- it ran out of time (504 / DEADLINE_EXCEEDED), or the request's deadline passed while
  it ran: 504 / DEADLINE_EXCEEDED naming it;
- it was cancelled: the cancellation goes on;
- it failed in any other way (its own exception, 401/403 for a wrong token, no such
  API): 500 / INTERNAL naming it.

Every message starts `dependency <Name>.<api>`, so a log line or an error body tells
which hop failed. The dependency's own field violations are not passed on as the
caller's (their locations name the dependency's inputs, not the caller's); their text
is in the message.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import (
    Cancelled,
    ClientTimeout,
    DeadlineExceeded,
    InvalidArgument,
    Overloaded,
    PayloadTooLarge,
    ServerUnreachable,
    ServiceUnavailable,
    TensorwireError,
)

log = logging.getLogger("tensorwire.compose")


class DependencyFailed(TensorwireError):
    """A dependency failed in a way that is the calling service's problem (500)."""

    http_status = 500
    grpc_code = "INTERNAL"


def dependency_error(where: str, exc: BaseException) -> BaseException:
    """What a call to the dependency `where` (`Model.classify`) raises for `exc`."""
    if isinstance(exc, asyncio.CancelledError | Cancelled):
        return exc
    if isinstance(exc, TensorwireError):
        message = exc.message
        if isinstance(exc, Overloaded):
            return Overloaded(f"dependency {where} is overloaded: {message}",
                              headers=_retry_after(exc))
        if isinstance(exc, ServerUnreachable):
            return ServiceUnavailable(f"dependency {where} is down: {message}")
        if isinstance(exc, ServiceUnavailable):
            return ServiceUnavailable(f"dependency {where} is unavailable: {message}",
                                      headers=_retry_after(exc))
        if isinstance(exc, DeadlineExceeded | ClientTimeout):
            return DeadlineExceeded(f"dependency {where} did not answer in time: {message}")
        if isinstance(exc, InvalidArgument | PayloadTooLarge):
            return DependencyFailed(f"dependency {where} refused its input: {message}")
        if not exc.public:
            return DependencyFailed(f"dependency {where} failed: {message}")
        return DependencyFailed(f"dependency {where} failed ({type(exc).__name__}): "
                                f"{message}")
    # The in-process dependency's own exception: logged with its traceback, as its own
    # server would log it, and answered without it.
    log.error("dependency %s failed", where, exc_info=exc)
    return DependencyFailed(f"dependency {where} failed: {type(exc).__name__}")


def _retry_after(exc: TensorwireError) -> dict[str, str]:
    value = exc.headers.get("Retry-After") or exc.headers.get("retry-after")
    return {"Retry-After": value} if value else {}
