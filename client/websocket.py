"""A streamed-input call over HTTP: the API's WebSocket, as the server's
`tensorwire.http.websocket_route` serves it.

One message per element goes out as the contract says: the element's raw body as a
binary message where it has one (a tensor's `.npy`, a file's bytes), a text element as
its text, anything else as JSON text; an empty binary message ends the stream. Sending
runs in its own task, beside the reading, and waits for the socket to drain, so a
server that reads slowly holds the client's iterable back. Each message back is one
result (the result of a client-streaming API, a chunk of a bidirectional one), decoded
by the output's kind; a close other than 1000 is the error its reason carries
(`tensorwire.wire.websocket_protocol`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp

from ..errors import ClientError, ClientTimeout
from ..wire import websocket_protocol
from ..wire.field_error import FieldError, invalid_argument
from . import values
from .api import RemoteAPI
from .filedata import ClientFiles, read_body
from .jsonkinds import JsonKind
from .response import BytesPayload, media_type_of
from .streams import elements

#: How long closing waits for the server's close frame once the client is done.
CLOSE_TIMEOUT = 5.0


class Socket:
    """One open WebSocket call: its sender task and its incoming results."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, api: RemoteAPI,
                 source: Any, files: ClientFiles, timeout: float | None = None) -> None:
        self.ws = ws
        loop = asyncio.get_running_loop()
        #: When the whole call must be over (the client's `timeout`), loop time.
        self.deadline = loop.time() + timeout if timeout else None
        self.timeout = timeout
        self.api = api
        self.files = files
        self.field = api.fields[0]
        output: JsonKind = api.output
        self.output = output
        #: What a binary message back is (the output's binary form: `.npy`, a file).
        self.binary_media = media_type_of((output.accept or "").split(",")[0]) or None
        #: An element the client itself could not send (raised instead of the close).
        self.error: Exception | None = None
        self.done = False
        self._sender = asyncio.ensure_future(self._send_all(source))

    async def _send_all(self, source: Any) -> None:
        try:
            async for element in elements(source):
                await self._send(element)
            await self.ws.send_bytes(b"")  # the end of the stream
        except (ConnectionError, aiohttp.ClientConnectionError):
            pass  # the server closed first: its close says why
        except Exception as exc:  # an element the client cannot encode
            self.error = exc
            await self.ws.close()

    async def _send(self, element: Any) -> None:
        kind: JsonKind = self.field.kind
        try:
            body = kind.body(element, self.files)
        except FieldError as exc:
            raise invalid_argument(exc.under(self.field.name)) from None
        if body is not None:
            await self.ws.send_bytes(read_body(body))
        elif kind.is_text and isinstance(element, str):
            await self.ws.send_str(element)
        else:
            try:
                data = kind.to_json(element)
            except FieldError as exc:
                raise invalid_argument(exc.under(self.field.name)) from None
            await self.ws.send_str(values.dumps(data).decode())

    async def next_result(self) -> Any:
        """The next result, or StopAsyncIteration once the server closed with 1000."""
        if self.done:
            raise StopAsyncIteration
        try:
            async with asyncio.timeout_at(self.deadline):
                msg = await self.ws.receive()
        except TimeoutError:
            await self.aclose()
            raise ClientTimeout(f"{self.api.name} did not answer within {self.timeout} s"
                                ) from None
        if msg.type is aiohttp.WSMsgType.TEXT:
            if self.output.is_text:
                return msg.data
            return self.output.from_json(values.loads(msg.data))
        if msg.type is aiohttp.WSMsgType.BINARY:
            return await self.output.from_payload(BytesPayload(msg.data, self.binary_media),
                                                  self.files)
        await self.aclose()
        if self.error is not None:
            raise self.error
        # the server's close frame says how the call ended (the socket's own close code
        # may be 1006 when the server closed mid-send: a message over its limit)
        code = msg.data if msg.type is aiohttp.WSMsgType.CLOSE else self.ws.close_code
        if code == websocket_protocol.NORMAL:
            raise StopAsyncIteration
        if not isinstance(code, int) or msg.type is aiohttp.WSMsgType.ERROR:
            raise ClientError(f"the WebSocket of {self.api.name} broke: "
                              f"{msg.data or 'connection lost'}")
        raise websocket_protocol.error_from_close(code, msg.extra or "")

    async def result(self) -> Any:
        """A client-streaming call's one result (the stream then closes with 1000)."""
        try:
            value = await self.next_result()
        except StopAsyncIteration:
            raise ClientError(f"{self.api.name} closed its WebSocket without a result") from None
        try:
            await self.next_result()
        except StopAsyncIteration:
            return value
        raise ClientError(f"{self.api.name} sent more than one result")

    def __aiter__(self) -> Socket:
        return self

    async def __anext__(self) -> Any:
        return await self.next_result()

    async def aclose(self) -> None:
        """Stop sending and close the socket (a cancel, for the server, while its call
        runs)."""
        self.done = True
        if not self._sender.done():
            self._sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._sender
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.ws.close(), CLOSE_TIMEOUT)
