"""HTTP connections bounded in time and number: a deadline for each request head, an idle
keep-alive timeout, and a cap on open connections per worker.

aiohttp on its own keeps a socket that sends nothing, or half a request head, open for
its keep-alive timeout (3630 s), has no header-read timeout and accepts connections
without limit: idle sockets could use up a worker's file descriptors. Here:

- `header_timeout` (default 10 s): a connection must deliver a whole request head within
  it, counted from connecting (a new connection is for a request), or on a kept-alive
  connection from the first byte of the next request. A slow trickle does not extend it.
  Past it the connection is closed, with a 408 when part of a head had come. One sweeper
  per worker checks the deadlines (a tenth of the timeout apart, 10 ms to 1 s), so a late
  head is closed up to a tick after its deadline; a head that arrives whole in one read,
  as almost every does, costs nothing (a timer armed and cancelled per request cost a
  sixth of the server's CPU per small request over bare aiohttp). Envoy has
  the same deadline (`request_headers_timeout`, off unless set; its edge guide bounds
  whole requests to 300 s); uvicorn and aiohttp have none, gunicorn's sync workers only
  their 30 s worker timeout.
- `http_keepalive_timeout` (default 75 s, nginx's): how long an idle connection is kept
  between requests. uvicorn keeps 5 s, gunicorn 2 s, Envoy and aiohttp about an hour.
  Short values race a load balancer that reuses a pooled connection just as the server
  closes it (a 502); 75 s is above AWS ALB's and nginx's 60 s upstream idle timeouts.
  Raise it above your balancer's (GCP: 600 s).
- `max_connections` (default 1000 per worker, gunicorn's `worker_connections`): a
  connection beyond it takes the place of the longest-idle keep-alive connection (one
  that has served a request and waits for the next; it is closed, as nginx closes its
  idle keep-alive connections when it runs out), so pooled clients never lock a new
  one out. Only when none is idle (every connection has a request in flight, or is new
  and within its `header_timeout`) is the new one answered 503 (`Retry-After`) and
  closed at once, so its file descriptor is back before any request could be read.
  Envoy's edge guide caps a listener at 10000; uvicorn and aiohttp have no cap.

- `http_body_timeout` (default 60 s, nginx's `client_body_timeout`): a request body that
  stops arriving for that long (while the server is ready to read it) closes the
  connection. Envoy's edge guide uses 300 s (`stream_idle_timeout`); uvicorn and
  aiohttp wait forever.

- `max_request_size`, announced: a request that waits for `100 Continue` (`Expect`) to
  send a body whose Content-Length is over the limit is answered 413 at once, before
  aiohttp's route would send the `100 Continue` that makes curl upload it all first.

`request_timeout` bounds the method once the request has arrived. What aiohttp answers on
its own (a request line or header its parser refuses) is the error model's JSON, not its
plain text (`GuardedHandler.handle_error`).
Serve the app with `runner()` (it also turns off aiohttp's own inflation of compressed
bodies, which `tensorwire.http.body` does in bounded steps).
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import hdrs, web

from ..errors import PayloadTooLarge
from ..settings import Settings
from .aiohttp_compat import ProtocolBase, runner_server
from .direct import DirectRoutes
from .responses import error_response, from_protocol_error

log = logging.getLogger("tensorwire.http")

#: Seconds between two warnings about refused connections (a flood logs a line, not each).
_WARN_EVERY = 10.0
#: AppRunner arguments that are not RequestHandler arguments.
_RUNNER_ONLY = frozenset({"handle_signals", "shutdown_timeout", "handler_cancellation"})


def _response(status: str, error: str, *extra: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection (written before any request
    was parsed, so aiohttp's response machinery is not involved)."""
    body = orjson.dumps({"error": error})
    head = [f"HTTP/1.1 {status}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", "Connection: close", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@dataclass
class ConnectionGuard:
    """The limits of one worker's HTTP connections, and how many are open."""

    header_timeout: float
    max_connections: int
    body_timeout: float = 0.0
    retry_after: int = 1
    #: Largest request body (`max_request_size`; 0: none): a body announced larger
    #: with `Expect: 100-continue` is refused before it is sent.
    max_request_size: int = 0
    #: Connections open now (the refused ones too, until they are closed).
    open: int = 0
    #: Refusals since the last warning (one line per `_WARN_EVERY` s, not one each).
    refused: int = 0
    _warned_at: float = float("-inf")
    #: Idle keep-alive connections closed to make room, since the last log line.
    reclaimed: int = 0
    _reclaim_logged_at: float = float("-inf")
    #: Every open connection (scanned for an idle one only when the cap is reached).
    connections: set[GuardedHandler] = field(default_factory=set)
    #: Connections waiting for a request head under the deadline, and the sweeper's timer.
    _due: set[GuardedHandler] = field(default_factory=set)
    _sweeper: asyncio.TimerHandle | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ConnectionGuard:
        return cls(settings.header_timeout, settings.max_connections,
                   settings.http_body_timeout, settings.retry_after,
                   max_request_size=settings.max_request_size)

    def __post_init__(self) -> None:
        self.busy = _response(
            "503 Service Unavailable",
            f"too many connections: this worker serves at most {self.max_connections}",
            f"Retry-After: {self.retry_after}")
        self.late = _response(
            "408 Request Timeout",
            f"the request head did not arrive within {self.header_timeout:g} s")

    def refuse(self, now: float) -> None:
        """Count a refused connection; warn at most once per `_WARN_EVERY` seconds."""
        self.refused += 1
        if now - self._warned_at >= _WARN_EVERY:
            log.warning("refused %d connection(s): max_connections (%d per worker) are open",
                        self.refused, self.max_connections)
            self.refused = 0
            self._warned_at = now

    def make_room(self, newcomer: GuardedHandler, now: float) -> bool:
        """Close the longest-idle keep-alive connection for `newcomer`; False when every
        other connection is busy (or new), and the newcomer must be refused."""
        victim: GuardedHandler | None = None
        since = 0.0
        for handler in self.connections:
            idle = handler._idle_since() if handler is not newcomer else None
            if idle is not None and (victim is None or idle < since):
                victim, since = handler, idle
        if victim is None:
            return False
        victim.force_close()
        self.reclaimed += 1
        if now - self._reclaim_logged_at >= _WARN_EVERY:
            log.info("closed %d idle keep-alive connection(s) for new ones: "
                     "max_connections (%d per worker) are open", self.reclaimed,
                     self.max_connections)
            self.reclaimed = 0
            self._reclaim_logged_at = now
        return True

    @property
    def tick(self) -> float:
        """Seconds between two sweeps of the head deadlines."""
        return min(1.0, max(0.01, self.header_timeout / 10))

    def arm(self, handler: GuardedHandler, loop: asyncio.AbstractEventLoop) -> None:
        """Put `handler`'s head deadline under the sweeper (started if it is not running)."""
        self._due.add(handler)
        if self._sweeper is None:
            self._sweeper = loop.call_later(self.tick, self._sweep, loop)

    def disarm(self, handler: GuardedHandler) -> None:
        self._due.discard(handler)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweeper = None
        now = loop.time()
        for handler in [h for h in self._due if h._head_due <= now]:
            self._due.discard(handler)
            handler._head_late()
        if self._due:  # idle otherwise: the next armed deadline starts it again
            self._sweeper = loop.call_later(self.tick, self._sweep, loop)


#: aiohttp's own `data_received`, called directly (a `super()` per read costs).
_parse = web.RequestHandler.data_received


class GuardedHandler(ProtocolBase):
    """aiohttp's protocol with a request-head deadline, a body idle timeout and the
    connection cap (what it reads of aiohttp's own state: `ProtocolBase`)."""

    __slots__ = ("_body", "_body_timer", "_guard", "_head_due", "_head_started", "_last_read")

    def __init__(self, manager: web.Server, *, guard: ConnectionGuard,
                 dispatch: Any = None, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._guard = guard
        if dispatch is not None:  # compiled APIs past the router (tensorwire.http.direct)
            self.set_dispatch(dispatch)
        #: When the awaited request head is due (loop time; None: no head awaited).
        self._head_due: float | None = None
        #: Whether any byte of the awaited head has arrived (408, else a silent close).
        self._head_started = False
        #: The body being received, and when the last bytes came (`http_body_timeout`).
        self._body: Any = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._last_read = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        guard = self._guard
        guard.open += 1
        guard.connections.add(self)
        if guard.max_connections and guard.open > guard.max_connections \
                and not guard.make_room(self, self.loop.time()):
            guard.refuse(self.loop.time())
            transport.write(guard.busy)  # type: ignore[attr-defined]
            self.force_close()
            return
        self._arm(self.loop.time(), started=False)  # a new connection is for a request

    def data_received(self, data: bytes) -> None:
        # Decided after aiohttp parsed the bytes, so that a request arriving whole in one
        # read (the common case) neither arms, disarms nor reads the clock.
        if self._body is not None:  # a body under its idle timeout: these bytes count
            self._last_read = self.loop.time()
        _parse(self, data)
        if self.pending:
            if self._head_due is not None:
                self._disarm()  # a whole head arrived in time
            message, body = self.pending[-1]
            if body is not self._body and not body.is_eof():  # a body is to come
                if hdrs.EXPECT in message.headers and self._refuse_announced(message):
                    return
                self._last_read = self.loop.time()
                self._watch_body(body)
        elif self._head_due is not None:
            self._head_started = True
        elif self.waiting():  # part of the next head on a kept-alive connection
            self._arm(self.loop.time(), started=True)

    def body_progress(self) -> None:
        """Bytes of a body read straight into its array came (`read_into`): they
        count against `http_body_timeout` as bytes through `data_received` do."""
        self._last_read = self.loop.time()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._body = None
        self._guard.open -= 1
        self._guard.connections.discard(self)
        super().connection_lost(exc)

    def _refuse_announced(self, message: Any) -> bool:
        """Whether the request just parsed waits for `100 Continue` to send a body larger
        than the limit; if so it becomes a 413 (through `handle_error`, as a request the
        parser refused), so the client hears the refusal before it sends a byte of the
        body, never a `100 Continue` (aiohttp's routes would send one first)."""
        limit = self._guard.max_request_size
        length = message.headers.get(hdrs.CONTENT_LENGTH)
        if not limit or length is None or int(length) <= limit \
                or message.headers[hdrs.EXPECT].lower() != "100-continue":
            return False
        refusal = PayloadTooLarge(f"request body of {length} bytes exceeds the limit of "
                                  f"{limit} bytes")
        self.refuse_last(413, refusal, refusal.message)
        return True

    def handle_error(self, request: web.BaseRequest, status: int = 500,
                     exc: BaseException | None = None, message: str | None = None
                     ) -> web.StreamResponse:
        """aiohttp's own answer (a request its parser refused, a failure no handler
        caught) as the error model's JSON with a request id, not its plain text; the
        connection closes after it, as aiohttp's does."""
        if request.writer.output_size > 0:  # an answer began: aiohttp raises for that
            return super().handle_error(request, status, exc, message)
        err = from_protocol_error(status, exc)
        request_id = request.headers.get("X-Request-ID") or os.urandom(8).hex()
        if status >= 500:
            log.error("%s %s failed [%s]", request.method, request.path, request_id,
                      exc_info=exc)
        else:  # a client's malformed bytes: one line, not aiohttp's traceback
            log.info("refused a request from %s [%s]: %s", request.remote, request_id,
                     err.message)
        resp = error_response(err, request_id)
        resp.force_close()
        return resp

    def _idle_since(self) -> float | None:
        """When this keep-alive connection went idle, if it is idle: it has served a
        request, has none in hand and no byte of the next one has come (aiohttp sets the
        keep-alive deadline when a request ends; the earliest deadline is the longest
        idle). None for a busy, a closing, or a new connection."""
        if self.transport is None or not self.served or not self.waiting() \
                or (self._head_due is not None and self._head_started):
            return None
        return self.idle_deadline

    def _arm(self, now: float, *, started: bool) -> None:
        timeout = self._guard.header_timeout
        if timeout > 0:
            self._head_started = started
            self._head_due = now + timeout
            self._guard.arm(self, self.loop)

    def _disarm(self) -> None:
        if self._head_due is not None:
            self._head_due = None
            self._guard.disarm(self)

    def _watch_body(self, body: Any) -> None:
        """Close the connection if `body` stops arriving for `body_timeout` seconds."""
        self._body = body
        timeout = self._guard.body_timeout
        if timeout > 0 and self._body_timer is None:
            self._body_timer = self.loop.call_at(self._last_read + timeout, self._body_idle)

    def _body_idle(self) -> None:
        self._body_timer = None
        body, transport = self._body, self.transport
        if body is None or body.is_eof() or transport is None:
            self._body = None
            return
        timeout = self._guard.body_timeout
        now = self.loop.time()
        if not transport.is_reading():  # paused by us (back-pressure): not the client
            self._last_read = now
        if now - self._last_read < timeout:
            self._body_timer = self.loop.call_at(self._last_read + timeout, self._body_idle)
            return
        log.info("closed a connection whose request body stalled for %g s", timeout)
        self.force_close()  # a response may be under way: no 408 written into it

    def _head_late(self) -> None:
        """The sweeper found the head's deadline passed."""
        self._head_due = None
        if self.pending or self.transport is None:
            return
        if self._head_started:
            self.transport.write(self._guard.late)
        self.force_close()


class _GuardedRunner(web.AppRunner):
    """An AppRunner whose sites get `GuardedHandler`s as their protocol.

    A site passes `runner.server` to `loop.create_server` as the protocol factory; this
    runner hands out a factory that builds the guarded handler around the same server.
    """

    def __init__(self, app: web.Application, guard: ConnectionGuard,
                 handler_kwargs: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._guard = guard
        self._handler_kwargs = handler_kwargs

    @property
    def server(self) -> Any:
        server = runner_server(self)
        if server is None:
            return None
        guard, kwargs = self._guard, self._handler_kwargs
        dispatch = DirectRoutes.of(self.app, server.request_handler)

        def protocol() -> GuardedHandler:
            return GuardedHandler(server, loop=asyncio.get_running_loop(), guard=guard,
                                  dispatch=dispatch, **kwargs)

        return protocol


def runner(app: web.Application, settings: Settings, **kwargs: Any) -> web.AppRunner:
    """The AppRunner to serve `app` with: connection limits from `settings`, aiohttp's
    keep-alive set to `http_keepalive_timeout`, and compressed bodies left to
    `tensorwire.http.body` (aiohttp's `auto_decompress` is off)."""
    kwargs = {**kwargs, "keepalive_timeout": settings.http_keepalive_timeout,
              "auto_decompress": False}
    handler_kwargs = {k: v for k, v in kwargs.items() if k not in _RUNNER_ONLY}
    return _GuardedRunner(app, ConnectionGuard.from_settings(settings), handler_kwargs,
                          **kwargs)
