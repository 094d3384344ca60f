"""`tensorwire.grpc.call_failures`: what a failed call becomes in the error model (and what is
logged), and how the call is ended: status code, details, error kind and request id."""

from __future__ import annotations

import errno
import logging
from typing import Any, cast

import grpc
import pytest
from google.rpc import status_pb2

from tensorwire import errors
from tensorwire.errors import ERROR_KIND_HEADER
from tensorwire.grpc.call_failures import abort, failed
from tensorwire.wire.status import violations_from_status

LOG = logging.getLogger("tests.grpc.call_failures")


class Aborted(Exception):
    """What a real context's `abort` raises: the call ends there."""


class FakeContext:
    """The one method `abort` uses of a `grpc.aio.ServicerContext`, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[grpc.StatusCode, str, tuple[tuple[str, Any], ...]]] = []

    async def abort(self, code: grpc.StatusCode, details: str, *,
                    trailing_metadata: tuple[tuple[str, Any], ...] = ()) -> None:
        self.calls.append((code, details, trailing_metadata))
        raise Aborted


def test_a_public_error_is_itself_and_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    err = errors.InvalidArgument("a must be positive")
    with caplog.at_level(logging.DEBUG, LOG.name):
        assert failed(err, "api 'add'", "r1", LOG) is err
    assert caplog.records == []


def test_a_private_error_is_logged_and_answered_as_a_plain_internal_error(
        caplog: pytest.LogCaptureFixture) -> None:
    class Leaky(errors.InternalError):
        pass

    with caplog.at_level(logging.ERROR, LOG.name):
        err = failed(Leaky("db password rejected"), "api 'add'", "r2", LOG)
    assert type(err) is errors.InternalError and err.message == "Internal server error"
    [record] = caplog.records
    assert record.getMessage() == "api 'add' failed [r2]: db password rejected"
    assert record.exc_info is None


def test_a_bug_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    try:
        raise ZeroDivisionError("division by zero")
    except ZeroDivisionError as exc:
        bug = exc
    with caplog.at_level(logging.ERROR, LOG.name):
        err = failed(bug, "ModelInfer 'm'", "r3", LOG)
    assert type(err) is errors.InternalError
    [record] = caplog.records
    assert record.getMessage() == "ModelInfer 'm' failed [r3]"
    assert record.exc_info is not None and record.exc_info[1] is bug


def test_a_full_disk_is_insufficient_storage(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, LOG.name):
        err = failed(OSError(errno.ENOSPC, "No space left on device", "/tmp/x"), "api 'f'",
                     "r4", LOG)
    assert type(err) is errors.InsufficientStorage
    assert "/tmp/x" not in err.message
    assert len(caplog.records) == 1


async def _abort(err: errors.TensorwireError, request_id: str | None
                 ) -> tuple[grpc.StatusCode, str, dict[str, Any]]:
    """`abort` on a fake context: the code, details and trailing metadata it ended with."""
    context = FakeContext()
    with pytest.raises(Aborted):
        await abort(cast(grpc.aio.ServicerContext, context), err, request_id)
    [(code, details, metadata)] = context.calls
    return code, details, dict(metadata)


@pytest.mark.parametrize(("cls", "code"), [
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.Overloaded, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.ServiceUnavailable, grpc.StatusCode.UNAVAILABLE),
    (errors.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.UnsupportedMediaType, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.Cancelled, grpc.StatusCode.CANCELLED),
])
async def test_abort_ends_the_call_with_the_code_details_kind_and_request_id(
        cls: type[errors.TensorwireError], code: grpc.StatusCode) -> None:
    got_code, details, trailing = await _abort(cls("went wrong"), "r5")
    assert (got_code, details) == (code, "went wrong")
    assert trailing[ERROR_KIND_HEADER] == cls.__name__
    assert trailing["x-request-id"] == "r5"


async def test_abort_carries_field_violations_as_status_details() -> None:
    err = errors.InvalidArgument.at(["params", "a"], "must be positive")
    _, details, trailing = await _abort(err, None)
    assert details == "params.a: must be positive"
    assert "x-request-id" not in trailing  # the call ended before it had one
    status = status_pb2.Status.FromString(trailing["grpc-status-details-bin"])
    assert violations_from_status(status) == [
        {"loc": ["params", "a"], "msg": "must be positive", "type": "value_error"}]


async def test_abort_of_a_private_error_shows_nothing_of_it() -> None:
    code, details, trailing = await _abort(errors.InternalError("stack trace here"), "r6")
    assert (code, details) == (grpc.StatusCode.INTERNAL, "Internal server error")
    assert trailing[ERROR_KIND_HEADER] == "InternalError"
