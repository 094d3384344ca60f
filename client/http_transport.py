"""The HTTP transport (aiohttp): one session per client, APIs from `/schema.json`.

Requests follow the server's contract: a JSON object of inputs; `multipart/form-data`
when a file is among them (files as parts, the rest as JSON parts); the raw body for a
root input (text/plain for a string, the file itself, `.npy` for a tensor, else JSON).
Responses are decoded by the output's kind from whatever media type came back (JSON,
text, `.npy`, a file, a multipart response with one part per output field), and
server-sent events for streaming APIs.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from ..errors import (
    ERROR_KIND_HEADER,
    ClientError,
    ClientTimeout,
    ServerUnreachable,
    TensorwireError,
    error_from_http,
)
from ..version import __version__
from ..wire import websocket_protocol
from ..wire.field_error import FieldError, invalid_argument
from ..wire.sse import SSEDecoder
from . import tracecontext, values
from .api import RemoteAPI, RemoteField
from .filedata import Body, ClientFiles
from .jsonkinds import JsonKind, ListKind, ObjectKind, fields_summary
from .kinds import schema_kind
from .options import CallOptions, with_retries
from .response import PartPayload, ResponsePayload, media_type_of
from .target import Target
from .websocket import CLOSE_TIMEOUT, Socket

_ROOT_KEYS = ("root_input", "root_field", "is_stream")


def http_api(route: dict[str, Any]) -> RemoteAPI:
    """A RemoteAPI from one route of `/schema.json`."""
    inp = dict(route.get("input") or {})
    out = dict(route.get("output") or {})
    name = route["name"]
    root = bool(inp.get("root_input"))
    if root:
        schema = {k: v for k, v in inp.items() if k not in _ROOT_KEYS}
        kind = schema_kind(schema)
        fields = [RemoteField(inp.get("root_field") or "value", kind, kind.summary())]
        required: tuple[str, ...] = () if "default" in schema else (fields[0].name,)
    else:
        props = inp.get("properties") or {}
        fields = []
        for key, schema in props.items():
            kind = schema_kind(schema)
            fields.append(RemoteField(key, kind, kind.summary()))
        required = tuple(inp.get("required") or ())
    out_kind = schema_kind({k: v for k, v in out.items() if k not in ("is_stream",)})
    props = out.get("properties")
    summary = (fields_summary({k: schema_kind(v).summary() for k, v in props.items()})
               if out.get("type") == "object" and isinstance(props, dict) and props
               else out_kind.summary())
    return RemoteAPI(
        name=name, doc=route.get("description") or route.get("doc"), fields=fields,
        root=root, stream=bool(out.get("is_stream")), output=out_kind,
        output_summary=summary, address=route.get("route") or f"/{name}",
        required=required, stream_in=bool(inp.get("is_stream")),
    )


class HttpTransport:
    protocol = "http"

    def __init__(self, target: Target, *, token: str | None, connect_timeout: float,
                 root_certificates: bytes | None, files: ClientFiles) -> None:
        self.target = target
        self.files = files
        self.connect_timeout = connect_timeout
        self.headers = {"User-Agent": f"tensorwire-client/{__version__}"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._ssl: ssl.SSLContext | bool = True
        if root_certificates is not None:
            self._ssl = ssl.create_default_context(cadata=root_certificates.decode())
        self.session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------------ lifecycle
    async def connect(self, options: CallOptions) -> dict[str, RemoteAPI]:
        connector = aiohttp.TCPConnector(ssl=self._ssl if self.target.secure else False,
                                         limit=0)
        self.session = aiohttp.ClientSession(connector=connector, headers=self.headers)
        schema = await with_retries(options, lambda: self._get_json("/schema.json", options))
        if not isinstance(schema, dict) or not isinstance(schema.get("routes"), list):
            raise ClientError(f"{self.target}/schema.json is not a service contract")
        return {r["name"]: http_api(r) for r in schema["routes"]}

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    def _url(self, path: str) -> str:
        return self.target.base_url + path

    def _timeout(self, options: CallOptions) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=options.timeout, sock_connect=self.connect_timeout)

    async def _get_json(self, path: str, options: CallOptions) -> Any:
        assert self.session is not None
        async with (
            _mapped(self.target, options),
            self.session.get(self._url(path), timeout=self._timeout(options),
                             headers=options.headers) as resp,
        ):
            if resp.status >= 400:
                raise await http_error(resp)
            return values.loads(await resp.read())

    async def is_ready(self, options: CallOptions) -> bool:
        assert self.session is not None
        try:
            async with (
                _mapped(self.target, options),
                self.session.get(self._url("/readyz"), timeout=self._timeout(options),
                                 headers=options.headers) as resp,
            ):
                await resp.read()
                return resp.status == 200
        except ClientError:
            return False

    # ------------------------------------------------------------------ calls
    async def call(self, api: RemoteAPI, values_: dict[str, Any], options: CallOptions) -> Any:
        if api.stream_in:  # client streaming: the API's WebSocket, never retried
            socket = await self._open_socket(api, values_, options)
            try:
                return await socket.result()
            finally:
                await socket.aclose()

        async def attempt() -> Any:
            resp = await self._send(api, values_, options)
            try:
                async with _mapped(self.target, options):
                    return await self._decode(api, resp)
            finally:
                resp.release()

        return await with_retries(options, attempt)

    async def open_stream(self, api: RemoteAPI, values_: dict[str, Any],
                          options: CallOptions) -> AsyncIterator[Any]:
        if api.stream_in:  # bidirectional: the API's WebSocket
            return await self._open_socket(api, values_, options)
        resp = await with_retries(options, lambda: self._send(api, values_, options))
        return _EventStream(self, api, resp, options)

    async def _open_socket(self, api: RemoteAPI, values_: dict[str, Any],
                           options: CallOptions) -> Socket:
        """Open the API's WebSocket and start sending the streamed input's elements."""
        assert self.session is not None
        headers = dict(options.headers)
        if api.output.accept:
            headers["Accept"] = api.output.accept
        tracecontext.inject(headers)
        url = self._url(api.address)
        try:
            async with _mapped(self.target, options):
                ws = await self.session.ws_connect(
                    url, protocols=(websocket_protocol.SUBPROTOCOL,), headers=headers,
                    max_msg_size=0, compress=0, autoping=True,
                    timeout=aiohttp.ClientWSTimeout(ws_close=CLOSE_TIMEOUT))
        except aiohttp.WSServerHandshakeError as exc:
            raise error_from_http(exc.status, f"{url} refused the WebSocket: {exc.message}",
                                  None, (exc.headers or {}).get(ERROR_KIND_HEADER)) from None
        return Socket(ws, api, values_[api.fields[0].name], self.files, options.timeout)

    async def _send(self, api: RemoteAPI, values_: dict[str, Any], options: CallOptions
                    ) -> aiohttp.ClientResponse:
        """Send the request; returns the (unread) response of a successful status."""
        assert self.session is not None
        data, headers, bodies = self._encode(api, values_)
        headers.update(options.headers)
        tracecontext.inject(headers)  # the caller's trace, if it traces
        try:
            async with _mapped(self.target, options):
                resp = await self.session.post(self._url(api.address), data=data,
                                               headers=headers, timeout=self._timeout(options))
                if resp.status >= 400:
                    try:
                        raise await http_error(resp)
                    finally:
                        resp.release()
                return resp
        finally:
            for body in bodies:
                body.close()

    def _encode(self, api: RemoteAPI, values_: dict[str, Any]
                ) -> tuple[Any, dict[str, str], list[Body]]:
        """The request body; an input the client itself cannot send as the contract
        says (a tensor of a dtype that does not convert) is InvalidArgument at its
        field, as the same input is over gRPC."""
        try:
            return self._encode_body(api, values_)
        except FieldError as exc:
            raise invalid_argument(exc) from None

    def _encode_body(self, api: RemoteAPI, values_: dict[str, Any]
                     ) -> tuple[Any, dict[str, str], list[Body]]:
        headers: dict[str, str] = {}
        accept = api.output.accept
        if accept:
            headers["Accept"] = accept
        if api.root:
            return self._encode_root(api, values_, headers)
        if any(api.by_name[k].kind.is_file for k in values_):
            return self._encode_multipart(api, values_, headers)
        payload = {k: _to_json(api.by_name[k].kind, k, v) for k, v in values_.items()}
        headers["Content-Type"] = "application/json"
        return values.dumps(payload), headers, []

    def _encode_root(self, api: RemoteAPI, values_: dict[str, Any], headers: dict[str, str]
                     ) -> tuple[Any, dict[str, str], list[Body]]:
        if not values_:
            return b"", headers, []
        field = api.fields[0]
        value = values_[field.name]
        kind: JsonKind = field.kind
        try:
            body = kind.body(value, self.files)
        except FieldError as exc:
            raise exc.under(field.name) from None
        if body is not None:
            headers["Content-Type"] = body.media_type
            if body.filename:
                headers["Content-Disposition"] = aiohttp.helpers.content_disposition_header(
                    "attachment", filename=body.filename)
            return body.data, headers, [body]
        if kind.is_text and isinstance(value, str):
            headers["Content-Type"] = "text/plain; charset=utf-8"
            return value.encode("utf-8"), headers, []
        headers["Content-Type"] = "application/json"
        return values.dumps(_to_json(kind, field.name, value)), headers, []

    def _encode_multipart(self, api: RemoteAPI, values_: dict[str, Any],
                          headers: dict[str, str]) -> tuple[Any, dict[str, str], list[Body]]:
        writer = aiohttp.MultipartWriter("form-data")
        bodies: list[Body] = []
        try:
            for name, value in values_.items():
                kind: JsonKind = api.by_name[name].kind
                if kind.is_file:
                    items = value if kind.repeated_files and isinstance(value, list | tuple) \
                        else [value]
                    item_kind = getattr(kind, "item", kind)
                    for item in items:
                        body = item_kind.body(item, self.files)
                        assert body is not None
                        bodies.append(body)
                        part = writer.append(body.data, {"Content-Type": body.media_type})
                        part.set_content_disposition("form-data", name=name,
                                                     filename=body.filename or name)
                else:
                    part = writer.append(values.dumps(_to_json(kind, name, value)),
                                         {"Content-Type": "application/json"})
                    part.set_content_disposition("form-data", name=name)
        except BaseException:
            for body in bodies:
                body.close()
            raise
        return writer, headers, bodies

    async def _decode(self, api: RemoteAPI, resp: aiohttp.ClientResponse) -> Any:
        media = media_type_of(resp.headers.get("Content-Type"))
        kind: JsonKind = api.output
        if media is not None and media.startswith("multipart/"):
            return await self._decode_parts(kind, resp)
        return await kind.from_payload(ResponsePayload(resp), self.files)

    async def _decode_parts(self, kind: JsonKind, resp: aiohttp.ClientResponse) -> Any:
        """A multipart response: one part per output field (a list: repeated parts).

        A model output is a dict with every field (absent parts: None, or [] for a list
        field), as the same output reads over gRPC; a list of files is a list.
        """
        kind = getattr(kind, "inner", kind)
        props: dict[str, JsonKind] = kind.props if isinstance(kind, ObjectKind) else {}
        item = getattr(kind, "item", None)
        out: dict[str, Any] = {}
        reader = aiohttp.MultipartReader(resp.headers, resp.content)
        while (part := await reader.next()) is not None:
            if not isinstance(part, aiohttp.BodyPartReader):
                continue
            name = part.name or ""
            field = props.get(name) or (item if item is not None else JsonKind({}))
            many = isinstance(field, ListKind) or (item is not None and not props)
            part_kind = getattr(field, "item", field) if many else field
            value = await part_kind.from_payload(PartPayload(part), self.files)
            if many:
                out.setdefault(name, []).append(value)
            else:
                out[name] = value
        if not props:  # a list output: its parts are all named "result"
            return next(iter(out.values()), [])
        for name, field in props.items():
            out.setdefault(name, [] if isinstance(field, ListKind) else None)
        return {name: out[name] for name in props} | {
            k: v for k, v in out.items() if k not in props}


def _to_json(kind: JsonKind, name: str, value: Any) -> Any:
    try:
        return kind.to_json(value)
    except FieldError as exc:
        raise exc.under(name) from None


class _EventStream:
    """The chunks of one streaming call, decoded from server-sent events."""

    def __init__(self, transport: HttpTransport, api: RemoteAPI, resp: aiohttp.ClientResponse,
                 options: CallOptions) -> None:
        self.transport = transport
        self.api = api
        self.resp = resp
        self.options = options
        self.decoder = SSEDecoder()
        self.pending: list[Any] = []
        self.done = False
        self.chunks = resp.content.iter_any()

    def __aiter__(self) -> _EventStream:
        return self

    async def __anext__(self) -> Any:
        while not self.pending:
            if self.done:
                raise StopAsyncIteration
            async with _mapped(self.transport.target, self.options):
                try:
                    chunk = await anext(self.chunks)
                except StopAsyncIteration:
                    chunk = None
            events = self.decoder.feed(chunk) if chunk is not None else self.decoder.close()
            if chunk is None:
                self.done = True
                self.resp.release()
            for event in events:
                self.pending.append(event)
        event = self.pending.pop(0)
        if event.event == "error":
            await self.aclose()
            raise _stream_error(event.data)
        kind: JsonKind = self.api.output
        if kind.is_text:
            return event.data
        return kind.from_json(values.loads(event.data))

    async def aclose(self) -> None:
        self.done = True
        self.pending.clear()
        self.resp.close()


def _stream_error(data: str) -> TensorwireError:
    try:
        payload = values.loads(data)
    except ValueError:
        payload = {"error": data}
    status = payload.get("status") if isinstance(payload.get("status"), int) else 500
    return error_from_http(status, str(payload.get("error") or "stream failed"),
                           payload.get("detail"), payload.get("kind"))


async def http_error(resp: aiohttp.ClientResponse) -> TensorwireError:
    """The error a non-2xx response carries, rebuilt as its tensorwire class."""
    body = await resp.read()
    message: str | None = None
    detail = None
    request_id = None
    try:
        payload = values.loads(body) if body else {}
        if isinstance(payload, dict):
            message = payload.get("error") if isinstance(payload.get("error"), str) else None
            detail = payload.get("detail") if isinstance(payload.get("detail"), list) else None
            request_id = payload.get("request_id")
    except ValueError:
        pass
    if message is None:
        text = body.decode("utf-8", errors="replace").strip()
        message = text[:1000] or resp.reason or f"HTTP {resp.status}"
    err = error_from_http(resp.status, message, detail, resp.headers.get(ERROR_KIND_HEADER))
    err.headers.update(resp.headers)
    err.request_id = request_id or resp.headers.get("X-Request-ID")  # type: ignore[attr-defined]
    return err


@contextlib.asynccontextmanager
async def _mapped(target: Target, options: CallOptions) -> AsyncIterator[None]:
    """aiohttp's connection and timeout failures as the client's own error classes."""
    try:
        yield
    except aiohttp.ClientConnectorError as exc:
        reason = getattr(exc.os_error, "strerror", None) or str(exc.os_error or exc)
        raise ServerUnreachable(f"cannot connect to {target}: {reason}") from None
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
        raise ServerUnreachable(f"the connection to {target} was lost: "
                                f"{exc or type(exc).__name__}") from None
    except (TimeoutError, aiohttp.ServerTimeoutError):
        raise ClientTimeout(f"{target} did not answer within {options.timeout} s") from None
    except aiohttp.ClientPayloadError as exc:
        raise ClientError(f"the response from {target} was cut short: {exc}") from None
