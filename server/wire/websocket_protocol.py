"""What a WebSocket call of a streamed-input API says besides its messages, both ways.

A WebSocket has no status line once it is open, so a failed call ends with a close
frame: a close code from the error's HTTP status (below) and a reason that is the error
as compact JSON: `{"status": 400, "type": "less_than", "error": "frames.3.x: ..."}`
(the first violation's `type` and the error class's `kind` where they fit). RFC 6455
allows a reason of at most 123 bytes, so a long message is cut (ending in "..."); the
status and the close code always survive. The server writes the reason with
`close_reason` and the client rebuilds the error with `error_from_close` (its first
field violation from the message's `loc: msg` form, as gRPC's details give it), so what
is written is what is read.

Browsers cannot set headers on a WebSocket, so the bearer token may also travel as a
subprotocol: offer `["tensorwire", "bearer.<token>"]`; the server answers `tensorwire`
and never echoes the token.
"""

from __future__ import annotations

import re

import orjson

from ..errors import TensorwireError, error_from_http

#: The subprotocol the server selects (and tensorwire's client offers).
SUBPROTOCOL = "tensorwire"
#: A subprotocol carrying the bearer token: `bearer.<token>`.
BEARER_PREFIX = "bearer."

NORMAL = 1000
#: Close codes by the HTTP status of the error that ended the call (RFC 6455 §7.4.1 and
#: IANA's registry). Any other status closes with 1011.
CLOSE_CODES: dict[int, tuple[int, str]] = {
    400: (1007, "invalid data: an element failed validation, or a malformed message"),
    401: (1008, "policy violation: a missing or wrong bearer token (or not allowed)"),
    403: (1008, "policy violation: a missing or wrong bearer token (or not allowed)"),
    413: (1009, "too big: a message over max_request_size, or more elements than "
                "max_stream_elements"),
    415: (1003, "unsupported data: a message of a kind the element cannot be read from"),
    503: (1013, "try again later: the server is draining, over max_concurrency or not "
                "ready"),
}
SERVER_ERROR = 1011
#: What each close code means, in the order the docs list them.
DESCRIPTIONS: dict[int, str] = {
    NORMAL: "normal: the call is over (its result, or its last chunk, was sent)",
    **dict(sorted(CLOSE_CODES.values())),
    SERVER_ERROR: "server error: the method raised, or ran past its time limit",
}
_MAX_REASON = 123


def close_code(status: int) -> int:
    """The close code of an error with HTTP status `status`."""
    found = CLOSE_CODES.get(status)
    return found[0] if found is not None else SERVER_ERROR


def close_reason(error: TensorwireError, kind: str | None = None) -> str:
    """The error as the close frame's reason: JSON of at most 123 bytes (see above).

    The status and message always; the first violation's `type` and the error's `kind`
    while they fit beside the whole message; else the message is cut."""
    status = error.status_code
    violation = error.detail[0].get("type") if error.detail else None
    extras = [{"kind": kind, "type": violation}, {"type": violation}, {"kind": kind}]
    for extra in extras:
        fields = {k: v for k, v in extra.items() if v}
        text = _json({"status": status, **fields, "error": error.message})
        if fields and len(text) <= _MAX_REASON:
            return text.decode()
    message = error.message
    text = _json({"status": status, "error": message})
    while len(text) > _MAX_REASON:  # a character is 1 to 6 bytes of JSON: cut, measure
        message = message[:-((len(text) - _MAX_REASON) // 6 + 1)]
        text = _json({"status": status, "error": message + "..."})
    return text.decode()


def _json(payload: dict[str, object]) -> bytes:
    return orjson.dumps(payload)


#: An error message that names its field: "frames.3.x: why" (the error model's form).
_AT = re.compile(r"^([A-Za-z_][\w-]*(?:\.[\w-]+)*): (.+?)(?: \(and \d+ more\))?$", re.S)


def error_from_close(code: int, reason: str) -> TensorwireError:
    """The error a non-normal close carries, rebuilt as its tensorwire class (a
    reason that is not tensorwire's JSON: the status its close code stands for). A
    validation error's first violation is rebuilt from its message (`loc: msg`) and
    `type`, as gRPC's field violations give it."""
    try:
        payload = orjson.loads(reason) if reason else {}
    except orjson.JSONDecodeError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    status = payload.get("status")
    if not isinstance(status, int):
        status = next((s for s, (c, _) in CLOSE_CODES.items() if c == code), 500)
    message = payload.get("error")
    if not isinstance(message, str) or not message:
        known = DESCRIPTIONS.get(code)
        message = reason or (f"the WebSocket closed with code {code}" +
                             (f" ({known})" if known else ""))
    kind = payload.get("kind") if isinstance(payload.get("kind"), str) else None
    detail = None
    violation = payload.get("type")
    found = _AT.match(message) if isinstance(violation, str) else None
    if found is not None:
        loc = [int(p) if p.isdigit() else p for p in found.group(1).split(".")]
        detail = [{"loc": loc, "msg": found.group(2), "type": violation}]
    return error_from_http(status, message, detail, kind)


def bearer_subprotocol(token: str) -> str:
    """The subprotocol that carries `token`."""
    return BEARER_PREFIX + token


def token_of(protocols: str | None) -> str | None:
    """The bearer token offered as a subprotocol in a `Sec-WebSocket-Protocol` header."""
    for item in (protocols or "").split(","):
        item = item.strip()
        if item.startswith(BEARER_PREFIX) and len(item) > len(BEARER_PREFIX):
            return item[len(BEARER_PREFIX):]
    return None
