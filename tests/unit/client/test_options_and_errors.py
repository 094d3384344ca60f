"""Retry policy and the error classes clients rebuild from a status."""

from __future__ import annotations

import asyncio

import pytest

from tensorwire import errors
from tensorwire.client.options import CallOptions, with_retries


def run(coro):
    return asyncio.run(coro)


def flaky(failures, exc_type=errors.ServerUnreachable):
    calls = {"n": 0}

    async def attempt():
        calls["n"] += 1
        if calls["n"] <= failures:
            raise exc_type("nope")
        return calls["n"]

    return attempt, calls


def test_retries_are_off_by_default():
    attempt, calls = flaky(1)
    with pytest.raises(errors.ServerUnreachable):
        run(with_retries(CallOptions(), attempt))
    assert calls["n"] == 1


@pytest.mark.parametrize("exc_type", [errors.ServerUnreachable, errors.ServiceUnavailable,
                                      errors.Overloaded])
def test_retryable_failures_are_retried(exc_type):
    attempt, calls = flaky(2, exc_type)
    assert run(with_retries(CallOptions(retries=2, backoff=0), attempt)) == 3
    attempt, calls = flaky(3, exc_type)
    with pytest.raises(exc_type):
        run(with_retries(CallOptions(retries=2, backoff=0), attempt))
    assert calls["n"] == 3


@pytest.mark.parametrize("exc_type", [errors.InvalidArgument, errors.InternalError,
                                      errors.ClientTimeout, errors.DeadlineExceeded])
def test_other_failures_are_not_retried(exc_type):
    attempt, calls = flaky(1, exc_type)
    with pytest.raises(exc_type):
        run(with_retries(CallOptions(retries=5, backoff=0), attempt))
    assert calls["n"] == 1


def test_backoff_grows_is_capped_and_honours_retry_after():
    options = CallOptions(retries=5, backoff=0.1, max_backoff=1.0)
    plain = errors.Overloaded("x")
    for attempt in range(6):
        assert 0 <= options.delay(attempt, plain) <= min(1.0, 0.1 * 2 ** attempt)
    told = errors.Overloaded("x", headers={"Retry-After": "0.5"})
    assert options.delay(0, told) >= 0.5
    assert options.delay(0, errors.Overloaded("x", headers={"Retry-After": "60"})) <= 1.0


def test_options_validate_and_merge():
    with pytest.raises(ValueError):
        CallOptions(timeout=0)
    with pytest.raises(ValueError):
        CallOptions(retries=-1)
    base = CallOptions(timeout=1, headers={"a": "1"})
    merged = base.merged(timeout=None, headers={"b": "2"})
    assert merged.timeout is None and merged.headers == {"a": "1", "b": "2"}
    assert base.headers == {"a": "1"}


@pytest.mark.parametrize(("status", "code", "kind", "cls"), [
    (503, "RESOURCE_EXHAUSTED", "Overloaded", errors.Overloaded),
    (503, "UNAVAILABLE", "ServiceUnavailable", errors.ServiceUnavailable),
    (415, "INVALID_ARGUMENT", "UnsupportedMediaType", errors.UnsupportedMediaType),
    (400, "INVALID_ARGUMENT", "InvalidArgument", errors.InvalidArgument),
    (500, "INTERNAL", "InternalError", errors.InternalError),
    (413, "RESOURCE_EXHAUSTED", "PayloadTooLarge", errors.PayloadTooLarge),
])
def test_the_error_kind_picks_the_class_on_both_protocols(status, code, kind, cls):
    assert type(errors.error_from_http(status, "m", None, kind)) is cls
    assert type(errors.error_from_grpc(code, "m", None, kind)) is cls


def test_a_kind_that_does_not_fit_the_status_is_ignored():
    assert type(errors.error_from_http(400, "m", None, "Overloaded")) is errors.InvalidArgument
    assert type(errors.error_from_grpc("INTERNAL", "m", None, "Nope")) is errors.InternalError
    assert type(errors.error_from_http(503, "m")) is errors.Overloaded  # status only


def test_error_kind_of_user_subclasses_is_their_builtin_base():
    class ModelNotLoaded(errors.ServiceUnavailable):
        pass

    assert errors.error_kind(ModelNotLoaded()) == "ServiceUnavailable"
    assert errors.error_kind(errors.InvalidArgument()) == "InvalidArgument"
    assert errors.error_kind(errors.TensorwireError()) == "InternalError"


def test_media_type_errors_are_invalid_arguments_on_both_protocols():
    http = errors.error_from_http(415, "m", [{"loc": ["image"], "msg": "m"}],
                                  "UnsupportedMediaType")
    grpc = errors.error_from_grpc("INVALID_ARGUMENT", "m", [{"loc": ["image"], "msg": "m"}])
    assert isinstance(http, errors.InvalidArgument) and isinstance(grpc, errors.InvalidArgument)
    assert http.status_code == 415 and errors.NotAcceptable.http_status == 406
    assert issubclass(errors.NotAcceptable, errors.InvalidArgument)
