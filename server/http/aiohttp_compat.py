"""Every use of aiohttp's internals, in one module (as FastAPI's `_compat`, pydantic's
`_internal`): a new aiohttp release breaks this file, loudly, and nothing else.

tensorwire reaches past aiohttp's public API in five places, each for a measured reason:

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
  sites, and an HTTPS site that accepts connections itself (`tensorwire.ops.https_site`);
- a request body read straight from the socket into its array (`ProtocolBase.read_into`):
  the transport is lent for the body's remaining bytes to a `BufferedProtocol` that
  `recv_into`s the array, then aiohttp's parser, which never saw those bytes, is
  replaced by a fresh one (as aiohttp makes it) so the connection's next request parses
  from its first byte. Without it every chunk is received into a new bytes object,
  copied again by the parser into another, and only then into the array.

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
from aiohttp.web_protocol import (
    MAX_MSG_QUEUE_SIZE,
    HttpRequestParser,
    RequestPayloadError,
    _ErrInfo,
)
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
    Reliance("RequestHandler", "_parser", "replaced after a body read past it (read_into)"),
    Reliance("RequestHandler", "_read_bufsize", "a fresh parser's read buffer size"),
    Reliance("RequestHandler", "_reading_paused", "no body lent while aiohttp holds reading"),
    Reliance("RequestHandler", "_upgraded", "no body lent on an upgraded connection"),
    Reliance("RequestHandler", "max_line_size", "a fresh parser's limits, as aiohttp's"),
    Reliance("RequestHandler", "max_field_size", "a fresh parser's limits, as aiohttp's"),
    Reliance("RequestHandler", "max_headers", "a fresh parser's limits, as aiohttp's"),
    Reliance("web_protocol", "MAX_MSG_QUEUE_SIZE", "a fresh parser's message queue bound"),
    Reliance("web_protocol", "RequestPayloadError", "a fresh parser's payload error"),
    Reliance("web_protocol", "HttpRequestParser", "the parser aiohttp makes per connection"),
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

    __slots__ = ("_auto_decompress",)

    def __init__(self, manager: web.Server, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        #: What aiohttp's parser was made with (a fresh one is made the same way).
        self._auto_decompress = kwargs.get("auto_decompress", True)

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

    # ----------------------------------------------------------------- bodies lent
    _parser_slot: Any = _slot(web.RequestHandler, "_parser")
    _reading_paused_slot: Any = _slot(web.RequestHandler, "_reading_paused")
    _upgraded_slot: Any = _slot(web.RequestHandler, "_upgraded")

    def body_progress(self) -> None:
        """Bytes of a lent body arrived (a subclass's idle timeout counts them)."""

    async def read_into(self, payload: Any, view: memoryview, length: int) -> int:
        """Fill `view` with the rest of the request body `payload` (aiohttp's
        StreamReader of a body of `length` bytes, not chunked, not compressed): first
        what aiohttp has buffered, then straight from the socket (`_Lender`). Returns
        the bytes filled: fewer than `view` only where the body ended first.

        The socket is lent only when `view` takes exactly the rest of the body (so not
        one byte of a pipelined next request can land in it) and aiohttp is not
        holding the connection's reading for its own reasons; otherwise the body's
        chunks are copied in as they come.
        """
        pos = 0
        end = view.nbytes
        while pos < end:  # what aiohttp holds: its parser's tail is fed as reading resumes
            data = payload.read_nowait(end - pos)
            if not data:
                break
            view[pos:pos + len(data)] = data
            pos += len(data)
        transport = self.transport
        rest = length - payload.total_bytes
        if (pos == end or rest != end - pos or transport is None or transport.is_closing()
                or self._reading_paused_slot or self._upgraded_slot or payload.is_eof()
                or transport.get_extra_info("sslcontext") is not None):
            while pos < end:
                data, _ = await payload.readchunk()
                if not data:
                    break
                size = min(len(data), end - pos)
                view[pos:pos + size] = memoryview(data)[:size]
                pos += size
            return pos
        lender = _Lender(self, transport, view[pos:], payload)
        done = lender.done
        try:
            await done
        except asyncio.CancelledError:  # the handler is cancelled (a shutdown, say):
            lender.abandon()  # the transport back, and the connection closed mid-body
            raise
        finally:  # the future holds its exception, whose traceback holds this frame:
            del done, lender  # not a cycle that keeps the buffer until a collection
        return end

    def _body_returned(self, payload: Any) -> None:
        """The lent body is in: the connection's bytes go to a fresh parser, which
        starts at the next request (the old one still counts the body's bytes)."""
        self._parser_slot = HttpRequestParser(
            self, self.loop, self._read_bufsize, max_line_size=self.max_line_size,
            max_field_size=self.max_field_size, max_headers=self.max_headers,
            payload_exception=RequestPayloadError, auto_decompress=self._auto_decompress,
            max_msg_queue_size=MAX_MSG_QUEUE_SIZE)
        payload.feed_eof()


class _Lender(asyncio.BufferedProtocol):
    """The transport's protocol while a request body is read straight into `view`:
    `get_buffer` hands the transport the part of `view` still empty (never more), so
    the kernel copies the socket's bytes into their place. Done, it hands the
    transport back to aiohttp's protocol; a connection lost or half-closed mid-body
    fails `done` and goes on to aiohttp's protocol as usual."""

    def __init__(self, handler: ProtocolBase, transport: Any, view: memoryview,
                 payload: Any) -> None:
        self.handler = handler
        self.transport = transport
        self.view = view
        self.pos = 0
        self.payload = payload
        #: Whether the body is in, or the lending ended otherwise.
        self.over = False
        self.done: asyncio.Future[None] = handler.loop.create_future()
        self._swap(self)

    def _swap(self, protocol: asyncio.BaseProtocol) -> None:
        # uvloop picks its read callbacks when reading starts: restart it
        self.transport.set_protocol(protocol)
        self.transport.pause_reading()
        self.transport.resume_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view[self.pos:]

    def buffer_updated(self, nbytes: int) -> None:
        self.pos += nbytes
        self.handler.body_progress()
        if self.pos >= self.view.nbytes:
            self.handler._body_returned(self.payload)
            self._release()
            self._swap(self.handler)
            if not self.done.done():
                self.done.set_result(None)

    def _release(self) -> None:
        """Drop the buffer: a transport may keep its last protocol's methods (uvloop
        does), and the buffer must be lent again once its request is over."""
        self.over = True
        self.view = memoryview(b"")
        self.payload = None

    def abandon(self) -> None:
        """The reader gave up (cancelled: `done` is cancelled with it): aiohttp's
        protocol gets the transport back, and the connection closes (its parser is
        still inside this body)."""
        if self.over:
            return
        self._release()
        self.transport.set_protocol(self.handler)
        self.handler.force_close()

    def _fail(self, why: str) -> None:
        if not self.over:
            self._release()
            self.transport.set_protocol(self.handler)
        if not self.done.done():
            self.done.set_exception(ConnectionResetError(why))

    def eof_received(self) -> bool | None:
        self._fail("the client closed its side mid-body")
        return self.handler.eof_received()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._fail("the client left mid-body")
        self.handler.connection_lost(exc)

    def pause_writing(self) -> None:
        self.handler.pause_writing()

    def resume_writing(self) -> None:
        self.handler.resume_writing()


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
