"""The one error model maps each error once to HTTP and gRPC, and back."""

from __future__ import annotations

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
