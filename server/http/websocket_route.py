"""A streamed-input API over HTTP: a WebSocket on the API's own route.

An API whose input is a stream (`AsyncIterator[T]`) answers an upgrade (`GET /<route>`
with `Upgrade: websocket`; anything else is 426 Upgrade Required). Then:

- **In: one message per element.** A text message is the element as a JSON body (as
  text for a `str` element, whose body is text/plain), a binary one as a body of the
  element's binary form (`.npy` for a tensor, the file's bytes for a file or image, the
  bytes of `bytes`): the element's HTTP facet reads it (`decode_body`), the API's
  `Decoder` validates it, so an element is checked as a root body of its type would
  be. An **empty binary message ends the stream** (WebSocket has no half-close); the
  messages are taken only as the method asks for them (`RequestPlan.feed`), so a slow
  model leaves them in aiohttp's bounded reader, which pauses the socket.
- **Out: one message per result** (the result of a client-streaming API, each chunk of
  a bidirectional one): the output facet's response body, as a text message when it is
  JSON or text, else a binary one (`.npy` when the upgrade's Accept asks for it).
  Each send waits for the socket to drain, so a slow reader pauses the generator.
- **The end:** close 1000 once the result (or the last chunk) is sent; a failure
  closes with its code and JSON reason (`tensorwire.wire.websocket_protocol`), the client
  closing first is a cancel (499). Auth refused by the bearer middleware closes 1008
  (browsers cannot see a refused handshake's status, but they see a close code).

The call goes through the HTTP envelope's pieces (`HttpEnvelope.refusal`, `begin`,
`end`, `error_of`): admission, metrics, access line, span and the error model, as for
POST. aiohttp's limits apply per message (`max_msg_size` = `max_request_size`: close
1009), the plan's per stream (`max_stream_elements`, `stream_idle_timeout`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from ..codecs import FieldError, UnsupportedBody
from ..codecs.http_facet import JSON, is_json_media
from ..contract.decoding import Decoder
from ..contract.descriptor import APISpec
from ..errors import Cancelled, PayloadTooLarge, TensorwireError, UpgradeRequired, error_kind
from ..runtime.service import ServiceRuntime
from ..settings import Settings
from ..wire import websocket_protocol
from ..wire.field_error import invalid_argument
from .native import unsupported_media
from .request_envelope import HttpEnvelope, HttpRoute

log = logging.getLogger("tensorwire.http")

#: request key: the auth middleware's refusal of an upgrade it let through, so that the
#: handler closes the socket with 1008 instead (see `tensorwire.security.http`).
AUTH_REFUSAL = web.RequestKey("tensorwire_auth_refusal", TensorwireError)
#: Bytes of messages read ahead of the method at most (besides aiohttp's own buffer),
#: or one message, whichever is more.
AHEAD = 1 << 20
#: aiohttp's close code when it refuses a message over `max_msg_size`.
_TOO_BIG = websocket_protocol.CLOSE_CODES[413][0]


class FramePart:
    """One received message as the `Part` a codec's `decode_body` reads: whole, in
    memory already (aiohttp bounded it), so a codec reads it whole (`bound` None)."""

    filename: str | None = None
    bound: int | None = None

    def __init__(self, name: str, data: bytes, media_type: str | None) -> None:
        self.name = name
        self.media_type = media_type
        self.length = len(data)
        self.consumed = 0
        self._data = data

    async def read(self) -> bytes:
        data, self._data = self._data[self.consumed:], b""
        self.consumed = self.length
        return data

    async def read_exactly(self, n: int) -> bytes:
        data = self._data[self.consumed:self.consumed + n]
        self.consumed += len(data)
        return data

    async def read_into(self, view: memoryview) -> int:
        data = await self.read_exactly(len(view))
        view[:len(data)] = data
        return len(data)

    async def save(self, path: Any) -> int:
        with open(path, "wb") as out:
            out.write(await self.read())
        return self.consumed


class Frames:
    """The element values a socket's messages carry, for the plan's element stream:
    each message read by the element's facet; an empty binary message is the end.

    One reader task (`_read`) keeps the socket read while the method works, so that a
    client that closes, or whose connection breaks, cancels the call at once (as a
    gRPC client's cancel does), even while the method only sends. What it reads waits
    in a short line of at most `AHEAD` bytes (or one message); past that the reader
    waits, aiohttp's bounded buffer fills and pauses the socket, and the client's sends
    wait. The line is a deque the element stream pops without suspending while it holds
    messages: a burst of messages costs one task switch, not one each (handing each
    over through an `asyncio.Queue` had cost 22 us a message, bench/streams_in.py)."""

    __slots__ = ("_ahead", "_binary", "_done", "_facet", "_line", "_name", "_pump",
                 "_reader_waits", "_scope", "_task", "_text", "_wanted", "_ws", "ended",
                 "max_size", "received")

    def __init__(self, ws: web.WebSocketResponse, steps: WebSocketSteps, scope: Any) -> None:
        self._ws = ws
        self._facet = steps.facet
        self._name = steps.field
        self._text = steps.text_media
        self._binary = steps.binary_media
        self._scope = scope
        self.max_size = steps.max_size
        #: Bytes of the messages received so far (metrics, access line).
        self.received = 0
        #: Whether the client ended its stream (the empty binary message came).
        self.ended = False
        self._done = False
        self._task = asyncio.current_task()  # the call's, cancelled if the client leaves
        self._line: deque[Any] = deque()
        self._ahead = 0  # bytes in the line
        self._wanted: asyncio.Future[None] | None = None  # the element stream's
        self._reader_waits: asyncio.Future[None] | None = None  # the reader's, for room
        self._pump = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        ws, line = self._ws, self._line
        loop = asyncio.get_running_loop()
        while True:
            msg = await ws.receive()
            kind = msg.type
            if kind is WSMsgType.TEXT or kind is WSMsgType.BINARY:
                if self.ended:  # data after the end is the client's mistake: dropped
                    continue
                self.ended = kind is WSMsgType.BINARY and not msg.data
                line.append(msg)
                self._ahead += len(msg.data)
                self._wake()
                if self._ahead >= AHEAD:  # a full line: wait until the method takes
                    self._reader_waits = loop.create_future()
                    await self._reader_waits
                continue
            if kind is WSMsgType.ERROR and ws.close_code == _TOO_BIG:
                line.append(msg)  # aiohttp refused a message (and closed): 413
                self._wake()
                return
            # the client closed (or its connection broke) before the call was over
            if not self._done and self._task is not None:
                self._task.cancel()
            return

    def _wake(self) -> None:
        waiter, self._wanted = self._wanted, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def finish(self) -> None:
        """The call is over: stop reading (the server closes the socket itself)."""
        self._done = True
        self._pump.cancel()

    def __aiter__(self) -> Frames:
        return self

    async def __anext__(self) -> Any:
        line = self._line
        while not line:
            self._wanted = asyncio.get_running_loop().create_future()
            await self._wanted
        msg = line.popleft()
        self._ahead -= len(msg.data) if msg.type is not WSMsgType.ERROR else 0
        waits = self._reader_waits
        if waits is not None and self._ahead < AHEAD:
            self._reader_waits = None
            if not waits.done():
                waits.set_result(None)
        if msg.type is WSMsgType.BINARY:
            if not msg.data:
                raise StopAsyncIteration
            media = self._binary
        elif msg.type is WSMsgType.TEXT:
            media = self._text
        else:
            raise PayloadTooLarge(f"a message over {self.max_size} bytes (max_request_size)")
        data = msg.data
        self.received += len(data)
        part = FramePart(self._name, data, media)
        try:
            return await self._facet.decode_body(part, self._scope)
        except UnsupportedBody as exc:
            raise unsupported_media(self._name, exc) from None
        except FieldError as exc:
            raise invalid_argument(exc.under(self._name)) from None


class WebSocketSteps:
    """The WebSocket of one streamed-input API (see the module docstring)."""

    def __init__(self, api: APISpec, runtime: ServiceRuntime, settings: Settings) -> None:
        field = api.stream_input
        assert field is not None, f"{api.name} takes no stream"
        self.api = api
        self.plan = runtime.plan(api.name)
        self.field = field.name
        self.facet = field.codec.http
        media = self.facet.body_media
        #: How a text message is read: as text where the element's body is text.
        self.text_media = media if media.startswith("text/") else JSON
        #: How a binary message is read: the element's binary body (None: its bytes).
        self.binary_media = self.facet.binary_media[0] if self.facet.binary_media else None
        self.output = api.output.codec.http
        self.max_size = settings.max_request_size
        element = Decoder(api).element_decoder()
        #: One element's value (what `Frames` read) -> validated arguments.
        self.decode: Callable[[Any, Any], dict[str, Any]] = lambda value, scope: element(value)

    def handler(self, envelope: HttpEnvelope) -> Callable[[web.Request], Any]:
        """The route's aiohttp handler (GET and POST: a request that is no upgrade gets
        426), marked `websocket` for the auth middleware."""
        route = envelope.route(HttpRoute(self.api.name, self.plan), "GET", self.api.route)

        async def handle(request: web.Request) -> web.StreamResponse:
            return await self.serve(envelope, route, request)

        handle.websocket = True  # type: ignore[attr-defined]
        return handle

    async def serve(self, envelope: HttpEnvelope, route: HttpRoute, request: web.Request
                    ) -> web.StreamResponse:
        """One call: the upgrade, the elements in, the answers out, the close."""
        ws = web.WebSocketResponse(protocols=(websocket_protocol.SUBPROTOCOL,), compress=False,
                                   max_msg_size=self.max_size, decode_text=False)
        if not ws.can_prepare(request).ok:
            error = UpgradeRequired(f"{self.api.route} takes a stream: open a WebSocket "
                                    f"(GET with Upgrade: websocket)",
                                    headers={"Upgrade": "websocket"})
            return route.error(error, request.headers.get("X-Request-ID"))
        await ws.prepare(request)
        refused = request.get(AUTH_REFUSAL) or envelope.refusal(route, request)
        if refused is not None:
            await _close(ws, refused)
            return ws
        start, info, ctx, span = envelope.begin(route, request)
        scope = route.plan.scope if ctx is None else ctx
        frames = Frames(ws, self, scope)
        status, sent = 200, 0
        try:
            kwargs = self.plan.feed(frames, self.decode, scope)
            accept = request.headers.get("Accept")
            if self.plan.stream:
                sent = await self._send_chunks(ws, self.plan.open(kwargs, ctx), accept)
            else:
                finished, value = self.plan.run(kwargs, ctx, None)
                sent = await self._send(ws, value if finished else await value, accept)
            frames.finish()
            await ws.close()
        except asyncio.CancelledError:  # the client left (`Frames`), or the server stops
            status = 499
            if ctx is not None:
                ctx.cancel()
            raise
        except Exception as exc:
            frames.finish()
            if ctx is not None:
                ctx.cancel()  # a `def` method still running may poll it and stop
            error = envelope.error_of(route, exc, request, info.id)
            status = error.status_code
            if not isinstance(error, Cancelled):
                await _close(ws, error)
        finally:
            frames.finish()
            envelope.end(route, start, status, frames.received, sent, info, ctx, span)
        return ws

    async def _send_chunks(self, ws: web.WebSocketResponse, stream: Any, accept: str | None
                           ) -> int:
        """A generator's chunks, one message each, as it yields them (the loop of
        `runtime.streams`; the time a send waits for a slow reader is not the
        method's)."""
        sent, mark = 0, stream.mark
        try:
            async for chunk in stream.chunks:
                mark.made += 1
                mark.holding = True
                sent += await self._send(ws, chunk, accept)
                mark.holding = False
        except asyncio.CancelledError:
            stream.check()  # DeadlineExceeded when the time limit fired
            raise
        finally:
            await stream.aclose()
        return sent

    async def _send(self, ws: web.WebSocketResponse, value: Any, accept: str | None) -> int:
        """One output message: the output facet's body; JSON and text as text."""
        body = self.output.encode(value, accept)
        content = body.content
        if not isinstance(content, bytes | bytearray | memoryview):  # a file, streamed
            chunks = []
            try:
                async for chunk in content:
                    chunks.append(chunk)
            finally:
                aclose = getattr(content, "aclose", None)
                if aclose is not None:
                    await aclose()
            content = b"".join(chunks)
        media = body.media_type.split(";", 1)[0]
        text = is_json_media(media) or media.startswith("text/")
        if ws.closed:
            raise ConnectionResetError("the client closed the WebSocket")
        await ws.send_frame(bytes(content), WSMsgType.TEXT if text else WSMsgType.BINARY)
        return len(content)


async def _close(ws: web.WebSocketResponse, error: TensorwireError) -> None:
    """End the call with `error`: its close code and JSON reason."""
    if ws.closed:
        return
    reason = websocket_protocol.close_reason(error, error_kind(error))
    try:
        await ws.close(code=websocket_protocol.close_code(error.status_code),
                       message=reason.encode())
    except ConnectionError:  # the client is gone already
        log.debug("could not close a WebSocket: the client is gone")
