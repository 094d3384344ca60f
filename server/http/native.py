"""One API's own HTTP route: request body -> validated arguments, result -> response.

The steps of `POST /<route>` that the one envelope (`tensorwire.http.request_envelope`) calls:
the body read as its shape needs (a plain JSON object straight from its bytes, a root
body, multipart parts, a compressed body inflated in bounded steps), the answer (JSON
bytes, a body streamed from a file, a multipart answer) and a generator's stream.

Type-agnostic: how a value is read from a body or a part, and written as a response, is
the codec's business. This module picks the input shape, enforces size limits, and
moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import hdrs, web
from aiohttp.http_exceptions import HttpProcessingError

from ..codecs import FieldError, HttpBody, UnsupportedBody
from ..codecs.http_facet import LENIENT_JSON, is_json_media
from ..context import Context
from ..contract.decoding import Decoder
from ..contract.descriptor import APISpec
from ..errors import (
    InternalError,
    InvalidArgument,
    PayloadTooLarge,
    TensorwireError,
    UnsupportedMediaType,
    as_error,
    error_kind,
)
from ..runtime.service import ServiceRuntime
from ..settings import Settings
from ..wire.field_error import invalid_argument
from .body import content_coding, read_body, write_view
from .parts import BodyPart, MultipartPart, malformed_multipart, media_type_of
from .request_envelope import Answer, HttpEnvelope, HttpRoute
from .stream_framing import SSE, chunk_writer, framing_for

log = logging.getLogger("tensorwire.http")

_MULTIPART = "multipart/form-data"
#: Content-Type values sent as is for JSON (the exact strings, so no parsing per request).
_JSON_TYPES = frozenset({"application/json", "application/json; charset=utf-8",
                         "application/json;charset=utf-8", "application/json; charset=UTF-8"})


def unsupported_media(name: str, exc: UnsupportedBody) -> UnsupportedMediaType:
    """415 naming the field, with the same detail shape as a validation error."""
    return UnsupportedMediaType(f"{name}: {exc}", detail=[
        {"loc": [name], "msg": str(exc), "type": "content_type"}])


class NativeSteps:
    """The read, answer and stream steps of one API's own HTTP route."""

    def __init__(self, api: APISpec, runtime: ServiceRuntime, settings: Settings) -> None:
        self.api = api
        self.decoder = Decoder(api)
        self.runtime = runtime
        self.plan = runtime.plan(api.name)
        self.settings = settings
        self.output = api.output.codec.http
        #: One streamed chunk's bytes (None for a unary API).
        self._encode_chunk = self.output.chunk_encoder() if api.output.stream else None
        #: One streamed chunk's server-sent event (the framing nearly every client reads).
        self._sse_chunk = self.output.sse_chunk_encoder() if api.output.stream else None
        self.max_size = settings.max_request_size
        self.max_parts = settings.max_parts
        self.max_part_size = settings.max_part_size or settings.max_request_size
        self._not_plain = api.is_root or api.has_files

    def route(self, envelope: HttpEnvelope) -> HttpRoute:
        """The route the envelope serves: these steps, chosen once for the API."""
        api = self.api
        route = HttpRoute(
            self.runtime.public(api.name), self.plan, self.read, self.answer,
            stream=self.stream if api.output.stream else None,
            plain_length=None if self._not_plain else self.plain_length,
            decode_json=None if self._not_plain else self.decoder.json_decoder(),
            json_encode=self._json_encode())
        return envelope.route(route, "POST", api.route)

    def _json_encode(self) -> Callable[[Any], bytes] | None:
        """A result's JSON bytes, when every answer is that (a JSON value, no Context
        that could set a status or headers): the envelope answers them itself. None:
        `answer` makes the output facet's `HttpBody`."""
        if self.api.context_param is not None or self.api.output.stream:
            return None
        return self.output.json_encoder()

    def answer(self, result: Any, request: web.Request, ctx: Context | None,
               kept: Any) -> Answer:
        """The response of a result: the output facet's body for the request's Accept,
        with the status and headers the method set on its Context."""
        body = self.output.encode(result, request.headers.get("Accept"))
        if isinstance(body.content, bytes | bytearray | memoryview):
            return web.Response(status=200 if ctx is None else ctx.response.status_code,
                                body=body.content, headers=self._headers(body, ctx))
        return self.respond(request, body, ctx)

    async def read(self, request: web.Request, scope: Any) -> tuple[dict[str, Any], None]:
        """The validated arguments of any request shape (`plain_length` says when the
        envelope reads a plain JSON object itself)."""
        return await self.decode(request, scope), None

    def plain_length(self, request: web.Request) -> int:
        """The body's length in the common case, else -1: a JSON object body within the
        size limit for an API with neither a root input nor files. Headers are looked up
        by aiohttp's `istr` names, which skip case folding (half the cost of a plain
        string key per lookup)."""
        headers = request.headers
        length = headers.get(hdrs.CONTENT_LENGTH)
        if length is None or (size := int(length)) > self.max_size:
            return -1
        media = headers.get(hdrs.CONTENT_TYPE)
        # A compressed body is inflated by `body.read_body`, in bounded steps.
        if (media is None or media in _JSON_TYPES) and hdrs.CONTENT_ENCODING not in headers:
            return size
        return -1

    @staticmethod
    def _headers(body: HttpBody, ctx: Context | None) -> dict[str, str]:
        extra = ctx.response.headers if ctx is not None else None
        if not body.headers and not extra:
            return {"Content-Type": body.media_type}
        return {"Content-Type": body.media_type, **body.headers, **(extra or {})}

    # ------------------------------------------------------------------ inputs
    async def decode(self, request: web.Request, ctx: Any) -> dict[str, Any]:
        api = self.api
        length = request.content_length
        if length is not None and length > self.max_size:
            raise PayloadTooLarge(f"request body of {length} bytes exceeds the limit of "
                                  f"{self.max_size} bytes")
        media = media_type_of(request.headers.get("Content-Type"))
        if media == _MULTIPART:
            if content_coding(request) is not None:
                raise UnsupportedMediaType(
                    "a compressed multipart/form-data body is not supported; send it "
                    "uncompressed (compress the files themselves)")
            values = await self.decode_multipart(request, ctx)
            return self.decoder.decode_values(values)
        if api.is_root:
            field = api.root_field
            body = BodyPart(request, field.name, self.max_size)
            try:
                value = await field.codec.http.decode_body(body, ctx)
            except UnsupportedBody as exc:
                raise unsupported_media(field.name, exc) from None
            except FieldError as exc:
                raise invalid_argument(exc.under(field.name)) from None
            return self.decoder.decode_root(value)
        if media is not None and not is_json_media(media) and media not in LENIENT_JSON:
            accepted = "multipart/form-data" if api.has_files else "application/json"
            raise UnsupportedMediaType(f"unsupported media type {media}; this API takes "
                                       f"{accepted}")
        if api.has_files:
            raise UnsupportedMediaType(f"{api.name} takes files: send multipart/form-data")
        return self.decoder.decode_json(await read_body(request, self.max_size))

    async def decode_multipart(self, request: web.Request, ctx: Any) -> dict[str, Any]:
        """Parts streamed one at a time; each goes to its field's codec."""
        api = self.api
        try:
            reader = await request.multipart()
        except Exception as exc:
            raise InvalidArgument(f"malformed multipart body: {exc}") from None
        values: dict[str, Any] = {}
        count = 0
        budget = self.max_size
        try:
            while (raw := await reader.next()) is not None:
                count += 1
                if count > self.max_parts:
                    raise PayloadTooLarge(f"more than {self.max_parts} parts")
                if not hasattr(raw, "read_chunk") or not hasattr(raw, "filename"):
                    raise InvalidArgument("nested multipart bodies are not supported")
                part = MultipartPart(raw, budget, min(self.max_part_size, budget),
                                     request.content_length)
                if api.is_root:
                    if count > 1:
                        raise InvalidArgument.at([api.root_field.name],
                                                 "a root input takes exactly one part",
                                                 "too_many_parts")
                    part.name = api.root_field.name
                field = api.field_by_name.get(part.name)
                if field is None:
                    expected = ", ".join(api.field_by_name) or "(none)"
                    raise InvalidArgument.at([part.name or "(unnamed)"],
                                             f"unexpected part; this API takes: {expected}",
                                             "extra_forbidden")
                http = field.codec.http
                try:
                    if http.repeated_parts:
                        values.setdefault(field.name, []).append(
                            await http.decode_part(part, ctx))
                    elif field.name in values:
                        raise InvalidArgument.at([field.name], "duplicated part",
                                                 "duplicate_part")
                    else:
                        values[field.name] = await http.decode_part(part, ctx)
                except UnsupportedBody as exc:
                    raise unsupported_media(field.name, exc) from None
                except FieldError as exc:
                    raise invalid_argument(exc.under(field.name)) from None
                budget -= part.consumed
                await raw.release()
        except (ValueError, AssertionError, HttpProcessingError) as exc:  # aiohttp's parse errors
            raise malformed_multipart(exc) from None
        if api.is_root and not values:
            return {}
        return values

    # ------------------------------------------------------------------ outputs
    async def respond(self, request: web.Request, body: HttpBody, ctx: Context | None
                      ) -> web.StreamResponse:
        """A streamed body (a file, a multipart answer); bytes are answered in `answer`."""
        resp = web.StreamResponse(status=200 if ctx is None else ctx.response.status_code,
                                  headers=self._headers(body, ctx))
        if body.length is not None:
            resp.content_length = body.length
        try:
            await resp.prepare(request)
            async for chunk in body.content:
                await write_view(resp, chunk)  # an array's memory: in drained steps
        finally:  # a client that leaves mid-download must not keep a file open
            aclose = getattr(body.content, "aclose", None)
            if aclose is not None:
                await aclose()
        await resp.write_eof()
        return resp

    async def stream(self, request: web.Request, kwargs: dict[str, Any],
                     ctx: Context | None) -> web.StreamResponse:
        """One frame per chunk (server-sent events, or what the client reads: see
        streams), written as soon as the method yields it. `ctx` is None for a method
        that declares no Context: status 200, no headers of the method's own."""
        framing = framing_for(request.headers, self.output.output_media)
        write_chunk = (self._sse_chunk if framing is SSE else
                       chunk_writer(framing, self._encode_chunk))
        stream = self.plan.open(kwargs, ctx)
        chunks, mark = stream.chunks, stream.mark  # the loop of runtime.streams, inline
        try:
            # Failures before the first chunk still get a proper status code.
            try:
                first = await anext(chunks, _END)
            except asyncio.CancelledError:
                stream.check()  # DeadlineExceeded when the time limit fired
                raise
        except BaseException:
            await stream.aclose()
            raise
        if ctx is None:
            resp = web.StreamResponse(headers=framing.headers)
        else:
            resp = web.StreamResponse(status=ctx.response.status_code,
                                      headers={**framing.headers, **ctx.response.headers})
        try:
            await resp.prepare(request)
            if first is not _END:
                mark.made += 1
                mark.holding = True
                await resp.write(write_chunk(first))
                mark.holding = False
                try:
                    async for chunk in chunks:
                        mark.made += 1
                        mark.holding = True  # the write's time is not the method's
                        await resp.write(write_chunk(chunk))
                        mark.holding = False
                except asyncio.CancelledError:
                    stream.check()
                    raise
        except ConnectionResetError:
            log.info("client left %s mid-stream", request.path)
            if ctx is not None:
                ctx.cancel()
            return resp
        except Exception as exc:
            err = as_error(exc)
            if not isinstance(exc, TensorwireError):
                log.exception("stream %s failed", request.path)
            shown = err if err.public else InternalError()
            # The stream already answered 200: the event names the error's status and
            # class so that clients raise what they would have raised before it began.
            payload = {**shown.to_dict(), "status": shown.status_code,
                       "kind": error_kind(shown)}
            try:
                if framing.error is not None:
                    await resp.write(framing.error(orjson.dumps(payload)))
            except ConnectionResetError:
                return resp
        finally:
            await stream.aclose()
        await resp.write_eof()
        return resp


class _End:
    pass


_END: Any = _End()

