"""Every use of aiohttp's internals, in one module (as FastAPI's `_compat`, pydantic's
`_internal`): a new aiohttp release breaks this file, loudly, and nothing else.

tensorwire reaches past aiohttp's public API in four places, each for a measured reason:

- the protocol (`RequestHandler`): a request-head deadline, a body idle timeout, the
  connection cap that closes the longest-idle keep-alive connection, a 413 before
  `100 Continue`, and compiled routes dispatched past the router
  (`tensorwire.http.connections`, `tensorwire.http.direct`). `ProtocolBase` below is
  the only class that touches the protocol's private state;
- a request's parsed head and payload writer (`message_of`, `JsonAnswer`): a small JSON
  answer written in one `transport.write`, as aiohttp would write it, without a
  `web.Response` and its header multidict;
- a runner's server and a TCP site's address and listener (`runner_server`,
  `site_address`, `adopt_listener`, `site_sockets`): the guarded protocol handed to
  sites, and an HTTPS site that accepts connections itself (`tensorwire.ops.https_site`).

`RELIANCES` lists every attribute used, with why; `missing()` checks them against the
installed aiohttp, and tests/unit/http/test_aiohttp_compat.py fails naming any that a
release removed. pyproject.toml pins aiohttp to the versions this is tested on
(`TESTED`).
"""

from __future__ import annotations

import asyncio
import inspect
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import hdrs, web, web_protocol, web_runner
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.http import SERVER_SOFTWARE, HttpVersion10, HttpVersion11
from aiohttp.streams import EMPTY_PAYLOAD
from aiohttp.web_protocol import _ErrInfo
from multidict import CIMultiDict

#: The aiohttp releases this module is tested on (pinned in pyproject.toml).
TESTED = ">=3.14,<3.15"


@dataclass(frozen=True)
class Reliance:
    """One private name of aiohttp that tensorwire uses, and why."""

    owner: str
    name: str
    why: str


RELIANCES: tuple[Reliance, ...] = (
    Reliance("RequestHandler", "_request_handler",
             "compiled routes dispatched past the router (http.direct)"),
    Reliance("RequestHandler", "_messages",
             "requests parsed and not yet handled: deadlines, 100-continue refusals"),
    Reliance("RequestHandler", "_waiter",
             "pending while the connection waits for its next request (keep-alive)"),
    Reliance("RequestHandler", "_request_count", "whether a connection has served"),
    Reliance("RequestHandler", "_next_keepalive_close_time",
             "when an idle keep-alive connection went idle (the connection cap)"),
    Reliance("RequestHandler", "_loop", "the protocol's event loop"),
    Reliance("web_protocol", "_ErrInfo", "a request answered through handle_error"),
    Reliance("BaseRequest", "_message", "the raw path, HTTP version and keep-alive"),
    Reliance("BaseRequest", "_payload_writer", "where a JsonAnswer writes"),
    Reliance("StreamResponse", "_eof_sent", "a JsonAnswer sent once"),
    Reliance("StreamResponse", "_keep_alive", "a JsonAnswer's keep-alive, as aiohttp's"),
    Reliance("StreamResponse", "_body_length", "a JsonAnswer's bytes, for access lines"),
    Reliance("BaseRunner", "_server", "the web.Server a guarded protocol wraps"),
    Reliance("BaseSite", "_runner", "the HTTPS site's protocol factory"),
    Reliance("BaseSite", "_server", "the HTTPS site's own listener (closed on stop)"),
    Reliance("TCPSite", "_host", "the HTTPS site's address"),
    Reliance("TCPSite", "_port", "the HTTPS site's address"),
    Reliance("TCPSite", "_backlog", "the HTTPS site's listen backlog"),
    Reliance("TCPSite", "_reuse_port", "the HTTPS site's SO_REUSEPORT"),
    Reliance("TCPSite", "_bound_port", "the port the HTTPS site bound (port 0)"),
)


#: The classes (and the module) the reliances name.
_OWNERS: dict[str, Any] = {
    "RequestHandler": web.RequestHandler, "BaseRequest": web.BaseRequest,
    "StreamResponse": web.StreamResponse, "BaseRunner": web_runner.BaseRunner,
    "BaseSite": web_runner.BaseSite, "TCPSite": web.TCPSite, "web_protocol": web_protocol}


def _has(owner: Any, name: str) -> bool:
    """Whether `owner` has `name`: a module attribute, a class attribute or slot, or an
    attribute its `__init__` sets (a request's parsed head is one)."""
    if not isinstance(owner, type):
        return hasattr(owner, name)
    if any(name in cls.__dict__ for cls in owner.__mro__):
        return True
    try:
        return f"self.{name} = " in inspect.getsource(owner.__init__)
    except (OSError, TypeError):  # no source to read: say it is missing, loudly
        return False


def missing() -> list[str]:
    """The reliances the installed aiohttp no longer meets, each named with its use."""
    return [f"aiohttp {r.owner}.{r.name} ({r.why})" for r in RELIANCES
            if not _has(_OWNERS[r.owner], r.name)]


# --------------------------------------------------------------------- the protocol
def _slot(owner: type, name: str) -> Any:
    """The member descriptor of `owner`'s slot `name`: an alias of it reads and writes
    the same storage at C speed (`ProtocolBase`). A release that drops the slot fails
    here, at import, naming it."""
    for cls in owner.__mro__:
        if name in cls.__dict__:
            return cls.__dict__[name]
    raise ImportError(f"aiohttp {owner.__name__} has no slot {name!r}: "
                      "tensorwire.http.aiohttp_compat needs updating")


class ProtocolBase(web.RequestHandler):
    """aiohttp's protocol, its private state read and written only here.

    The attributes below are aliases of aiohttp's own slots (their member descriptors),
    not properties: reading `self.pending` costs what reading `self._messages` does,
    on a path every request's bytes take.
    """

    __slots__ = ()

    #: The protocol's event loop.
    loop: asyncio.AbstractEventLoop = _slot(web.RequestHandler, "_loop")
    #: The (head, body stream) of requests parsed and not yet handled.
    pending: Any = _slot(web.RequestHandler, "_messages")
    #: Requests this connection has served.
    served: int = _slot(web.RequestHandler, "_request_count")
    #: When aiohttp closes this idle keep-alive connection (set as a request ends: the
    #: earliest is the longest idle).
    idle_deadline: float = _slot(web.RequestHandler, "_next_keepalive_close_time")
    #: Pending while the connection waits for its next request.
    _next_request: Any = _slot(web.RequestHandler, "_waiter")
    #: What each request is handed to (the app's handler, or `DirectRoutes`).
    _dispatch: Any = _slot(web.RequestHandler, "_request_handler")

    def set_dispatch(self, dispatch: Callable[[web.BaseRequest], Any]) -> None:
        """Route every request through `dispatch` (which falls back to the app)."""
        self._dispatch = dispatch

    def waiting(self) -> bool:
        """Whether the connection is idle, waiting for a request (none being handled);
        aiohttp's own keep-alive check reads the waiter the same way."""
        waiter = self._next_request
        return waiter is not None and not waiter.done() and not self.pending

    def refuse_last(self, status: int, exc: BaseException, message: str) -> None:
        """Answer the request parsed last through `handle_error` with `status`, its
        body never read (as a request the parser refused)."""
        self.pending[-1] = (_ErrInfo(status, exc, message), EMPTY_PAYLOAD)


def runner_server(runner: web.BaseRunner) -> web.Server | None:
    """The `web.Server` a set-up runner's sites serve (None before `setup`)."""
    return runner._server  # type: ignore[return-value]


# --------------------------------------------------------------------- sites
def site_address(site: web.TCPSite) -> tuple[web.BaseRunner, str, int, int, bool | None]:
    """(runner, host, port, backlog, reuse_port) a TCP site was made with."""
    return site._runner, site._host or "", site._port, site._backlog, site._reuse_port


def adopt_listener(site: web.TCPSite, listener: Any, port: int) -> None:
    """Make `listener` (with `close()`) the site's server, bound on `port`: `stop`
    closes it and `name` reports the port, as for aiohttp's own listener."""
    site._server = listener
    site._bound_port = port


def site_sockets(site: web.BaseSite) -> list[Any]:
    """The listening sockets of a started site (none for a site with no listener)."""
    server = site._server
    return list(getattr(server, "sockets", None) or [])


# --------------------------------------------------------------------- answers
#: A request's parsed head (method, raw path, version, headers, keep-alive).
message_of: Callable[[web.BaseRequest], Any] = operator.attrgetter("_message")

_STATUS_200 = {HttpVersion11: b"HTTP/1.1 200 OK\r\n", HttpVersion10: b"HTTP/1.0 200 OK\r\n"}
_JSON_HEAD = b"Content-Type: application/json\r\nContent-Length: "
#: above this a body is written after its head rather than copied behind it
_JOIN_LIMIT = 1 << 16
_SERVER = f"\r\nServer: {SERVER_SOFTWARE}\r\n".encode()


class _Clock:
    """The Date and Server header lines, remade once a second (aiohttp caches its
    formatted date the same way)."""

    __slots__ = ("lines", "second")

    def __init__(self) -> None:
        self.second = -1
        self.lines = b""

    def date_lines(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.lines = b"\r\nDate: " + rfc822_formatted_time().encode() + _SERVER
        return self.lines


_clock = _Clock()


class JsonAnswer(web.StreamResponse):
    """A 200 JSON answer written as aiohttp would write `web.Response(body=body,
    content_type="application/json")`, in one write and without a header multidict.

    aiohttp's protocol only calls `prepare`, `write_eof` and reads `keep_alive`; the
    class defaults of `StreamResponse` cover the rest, and `headers` is made on demand
    for any code that looks. tests/unit/http/test_direct.py compares the bytes with
    aiohttp's own answers.
    """

    _status = 200
    _reason = "OK"

    def __init__(self, body: bytes) -> None:  # no super(): nothing here needs its state
        self._body = body
        self._state: dict[Any, Any] = {}

    @property
    def content_length(self) -> int:  # type: ignore[override]
        """The body's length, read by the envelope's accounting before the answer is
        written (without making the header multidict)."""
        return len(self._body)  # type: ignore[arg-type]

    @property
    def _headers(self) -> CIMultiDict[str]:  # type: ignore[override]
        headers: CIMultiDict[str] = CIMultiDict()
        headers[hdrs.CONTENT_TYPE] = "application/json"
        headers[hdrs.CONTENT_LENGTH] = str(len(self._body or b""))
        return headers

    async def prepare(self, request: web.BaseRequest) -> Any:
        if self._eof_sent:
            return None
        body: bytes = self._body  # type: ignore[assignment]
        message = request._message
        keep_alive = not message.should_close
        self._keep_alive = keep_alive
        version = message.version
        if version == HttpVersion11:
            tail = b"\r\n" if keep_alive else b"Connection: close\r\n\r\n"
        elif version == HttpVersion10:
            tail = b"Connection: keep-alive\r\n\r\n" if keep_alive else b"\r\n"
        else:  # the parser accepts only HTTP/1.x; kept general all the same
            tail = b"\r\n" if keep_alive else b"Connection: close\r\n\r\n"
        status = _STATUS_200.get(version) or f"HTTP/{version[0]}.{version[1]} 200 OK\r\n".encode()
        head = b"%s%s%d%s%s" % (status, _JSON_HEAD, len(body), _clock.date_lines(), tail)
        writer = request._payload_writer
        transport = request.transport
        if transport is None or transport.is_closing():
            raise ConnectionResetError("Cannot write to closing transport")
        self._eof_sent = True
        self._body_length = len(body)
        writer.output_size += len(head) + len(body)  # type: ignore[attr-defined]
        if len(body) < _JOIN_LIMIT:
            transport.write(head + body)
        else:  # a large answer: no copy, and the handler waits while the buffer drains
            transport.write(head)
            transport.write(body)
            await writer.drain()  # type: ignore[attr-defined]
        return None

    async def write_eof(self, data: bytes = b"") -> None:
        return None
