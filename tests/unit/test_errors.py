"""The one error model maps each error once to HTTP and gRPC, and back."""

from __future__ import annotations

import errno
import os

import pytest

from tensorwire import errors


@pytest.mark.parametrize(("cls", "http", "grpc"), [
    (errors.InvalidArgument, 400, "INVALID_ARGUMENT"),
    (errors.Unauthenticated, 401, "UNAUTHENTICATED"),
    (errors.NotFound, 404, "NOT_FOUND"),
    (errors.MethodNotAllowed, 405, "UNIMPLEMENTED"),
    (errors.PayloadTooLarge, 413, "RESOURCE_EXHAUSTED"),
    (errors.UnsupportedMediaType, 415, "INVALID_ARGUMENT"),
    (errors.InternalError, 500, "INTERNAL"),
    (errors.Overloaded, 503, "RESOURCE_EXHAUSTED"),
    (errors.ServiceUnavailable, 503, "UNAVAILABLE"),
    (errors.DeadlineExceeded, 504, "DEADLINE_EXCEEDED"),
    (errors.InsufficientStorage, 507, "RESOURCE_EXHAUSTED"),
    (errors.UpgradeRequired, 426, "UNIMPLEMENTED"),
])
def test_each_error_has_one_http_status_and_one_grpc_code(cls, http, grpc):
    assert cls.http_status == http
    assert cls.grpc_code == grpc
    import grpc as grpc_module

    grpc_module.StatusCode[cls.grpc_code]  # a real code name


def test_clients_rebuild_the_same_class():
    assert type(errors.error_from_http(400, "bad")) is errors.InvalidArgument
    assert type(errors.error_from_grpc("INVALID_ARGUMENT", "bad")) is errors.InvalidArgument
    assert type(errors.error_from_grpc("DEADLINE_EXCEEDED", "x")) is errors.DeadlineExceeded
    assert type(errors.error_from_http(418, "teapot")) is errors.InvalidArgument
    assert errors.error_from_http(418, "teapot").status_code == 418
    assert type(errors.error_from_grpc("UNKNOWN", "x")) is errors.InternalError


def test_internal_errors_never_show_their_message():
    assert errors.InternalError("secret").public is False
    body = errors.InvalidArgument.at(["a", 0], "bad").to_dict()
    assert body == {"error": "a.0: bad", "detail": [{"loc": ["a", 0], "msg": "bad",
                                                       "type": "value_error"}]}


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_is_insufficient_storage_naming_the_cause(code):
    exc = OSError(code, os.strerror(code), "/tmp/tensorwire-1-x/r1-ab/upload.part")
    err = errors.as_error(exc)
    assert type(err) is errors.InsufficientStorage and err.public
    assert (err.http_status, err.grpc_code) == (507, "RESOURCE_EXHAUSTED")
    assert os.strerror(code).lower() in err.message
    assert "/tmp" not in err.message  # the server's path is not shown
    assert type(errors.error_from_http(507, err.message)) is errors.InsufficientStorage
    assert type(errors.error_from_grpc("RESOURCE_EXHAUSTED", "x",
                                       kind="InsufficientStorage")) is errors.InsufficientStorage


def test_other_failures_stay_private_internal_errors():
    assert type(errors.as_error(OSError(errno.EACCES, "Permission denied"))) is \
        errors.InternalError
    assert type(errors.as_error(RuntimeError("secret"))) is errors.InternalError
    bad = errors.InvalidArgument("x")
    assert errors.as_error(bad) is bad
