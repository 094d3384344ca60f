"""WebSocket close codes and reasons (`tensorwire.wire.websocket_protocol`): what the server
writes when a call fails is what the client reads back."""

from __future__ import annotations

import json

import pytest

from tensorwire import errors
from tensorwire.wire import websocket_protocol


@pytest.mark.parametrize(("error", "code"), [
    (errors.InvalidArgument("bad"), 1007),
    (errors.UnsupportedMediaType("wrong kind"), 1003),
    (errors.Unauthenticated("no token"), 1008),
    (errors.PayloadTooLarge("big"), 1009),
    (errors.Overloaded("busy"), 1013),
    (errors.ServiceUnavailable("draining"), 1013),
    (errors.InternalError(), 1011),
    (errors.DeadlineExceeded("slow"), 1011),
])
def test_each_error_closes_with_the_code_of_its_status(error, code):
    assert websocket_protocol.close_code(error.status_code) == code
    assert code in websocket_protocol.DESCRIPTIONS


def test_the_reason_is_json_within_123_bytes_and_rebuilds_the_error():
    err = errors.InvalidArgument.at(["readings", 3, "value"], "Input should be less than "
                                    "or equal to 100", "less_than_equal")
    reason = websocket_protocol.close_reason(err, errors.error_kind(err))
    assert len(reason.encode()) <= 123
    assert json.loads(reason)["status"] == 400
    back = websocket_protocol.error_from_close(1007, reason)
    assert type(back) is errors.InvalidArgument
    assert back.message == err.message
    assert back.detail == [{"loc": ["readings", 3, "value"],
                            "msg": "Input should be less than or equal to 100",
                            "type": "less_than_equal"}]
    overloaded = errors.Overloaded("more than 8 requests in flight")
    reason = websocket_protocol.close_reason(overloaded, "Overloaded")
    back = websocket_protocol.error_from_close(1013, reason)
    assert type(back) is errors.Overloaded  # the kind tells it from ServiceUnavailable


@pytest.mark.parametrize("message", ['frames.3: ' + 'x"' * 200, "é" * 300, "a" * 1000])
def test_a_long_message_is_cut_to_fit_escapes_and_all(message: str):
    reason = websocket_protocol.close_reason(errors.InvalidArgument(message), "InvalidArgument")
    assert len(reason.encode()) <= 123
    payload = json.loads(reason)
    assert payload["status"] == 400 and payload["error"].endswith("...")
    assert message.startswith(payload["error"][:-3])
    assert type(websocket_protocol.error_from_close(1007, reason)) is errors.InvalidArgument


def test_a_close_without_tensorwires_reason_is_read_by_its_code():
    err = websocket_protocol.error_from_close(1009, "")  # aiohttp's own refusal of a big message
    assert type(err) is errors.PayloadTooLarge and "1009" in err.message
    assert type(websocket_protocol.error_from_close(1011, "boom")) is errors.InternalError
    assert websocket_protocol.error_from_close(1011, "boom").message == "boom"


def test_the_token_travels_as_a_subprotocol():
    offered = f"tensorwire, {websocket_protocol.bearer_subprotocol('t0k3n')}"
    assert websocket_protocol.token_of(offered) == "t0k3n"
    assert websocket_protocol.token_of("tensorwire") is None
    assert websocket_protocol.token_of(None) is None
    assert websocket_protocol.token_of("bearer.") is None
