"""`tensorwire.AsyncClient`: call a tensorwire service from async code, over HTTP or gRPC.

    async with tensorwire.AsyncClient("http://localhost:3000") as client:
        summary = await client.summarize(text="...", max_words=4)
        print(await client.upper("root input"))        # positional: the root input
        async for letter in client.spell(word="hi"):   # a streaming API
            ...

The URL's scheme picks the protocol (`http(s)://` or `grpc(s)://`); the APIs are
discovered on connect (HTTP `/schema.json`, gRPC server reflection) and each becomes a
method of the client named like the API. An API whose name clashes with a client
method (`close`, `call`, ...) is reached with `client.call("close", ...)`.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import NotFound
from .api import APIInfo, RemoteAPI, adapt_output, validate_output_types
from .filedata import ClientFiles
from .grpc_transport import GrpcTransport
from .http_transport import HttpTransport
from .options import CallOptions
from .streams import AsyncStream
from .target import Target, parse_target

_KEEP: Any = object()


class _State:
    """What a client and its `with_options` views share: the discovered APIs, closed."""

    def __init__(self) -> None:
        self.apis: dict[str, RemoteAPI] | None = None
        self.aliases: dict[str, str] = {}
        self.closed = False


def _certificates(value: bytes | str | os.PathLike[str] | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


class AsyncClient:
    """A client of one tensorwire service (see the module docstring).

    Args:
        url: `http://host:port`, `https://...`, `grpc://host:port` or `grpcs://...`.
        token: sent as `Authorization: Bearer <token>` (HTTP header / gRPC metadata).
        timeout: seconds one call may take in all (a stream: until its last chunk);
            None (default) for no limit. Connecting has its own `connect_timeout`.
        retries: how often to retry a call that failed without reaching the method or
            that the server refused as overloaded/unavailable (connection refused, HTTP
            503, gRPC UNAVAILABLE), with exponential back-off from `backoff` seconds.
            Off by default: enable it only for idempotent calls.
        headers: extra HTTP headers / gRPC metadata for every call.
        root_certificates: PEM CA certificates (bytes or a file path) for https/grpcs.
        output_types: `{api_name: type}` to rebuild outputs as that type (a pydantic
            model instead of a dict, `PIL.Image.Image` instead of a `Path`, ...).
        files_dir: where file outputs are written (default: a private temporary
            directory, removed by `close()`).
        service: over gRPC, the service to use when the server offers several.
        channels: over gRPC, how many connections the client keeps (default 4); each
            call goes to the one with the fewest calls in flight, so that the server's
            workers (and pods behind one address) share the client's calls. 1 is one
            channel as plain grpcio has. HTTP ignores it (its session pools connections).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float | None = None,
        retries: int = 0,
        backoff: float = 0.1,
        connect_timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        root_certificates: bytes | str | os.PathLike[str] | None = None,
        output_types: Mapping[str, Any] | None = None,
        files_dir: str | os.PathLike[str] | None = None,
        service: str | None = None,
        channels: int | None = None,
    ) -> None:
        self._target: Target = parse_target(url)
        self._options = CallOptions(timeout=timeout, retries=retries, backoff=backoff,
                                    headers=dict(headers or {}))
        self._output_types = validate_output_types(output_types)
        self._files = ClientFiles(files_dir)
        certificates = _certificates(root_certificates)
        common = dict(token=token, connect_timeout=connect_timeout,
                      root_certificates=certificates, files=self._files)
        if self._target.protocol == "http":
            self._transport: Any = HttpTransport(self._target, **common)
        else:
            self._transport = GrpcTransport(self._target, service=service,
                                            channels=channels, **common)
        self._state = _State()
        self._owner = True

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    async def connect(cls, url: str, **kwargs: Any) -> AsyncClient:
        """A connected client: `client = await AsyncClient.connect(url)`."""
        client = cls(url, **kwargs)
        await client._connect()
        return client

    async def _connect(self) -> None:
        state = self._state
        if state.apis is not None:
            return
        if state.closed:
            raise RuntimeError("the client is closed")
        try:
            apis = await self._transport.connect(self._options)
        except BaseException:
            await self._transport.close()
            raise
        for name, api in apis.items():
            method = api.wire.get("method")
            if method and method != name:
                state.aliases[method] = name
        state.apis = apis

    async def close(self) -> None:
        """Close the connection and remove the private directory of file outputs."""
        if not self._owner or self._state.closed:
            return
        self._state.closed = True
        await self._transport.close()
        self._files.close()

    async def __aenter__(self) -> AsyncClient:
        await self._connect()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def protocol(self) -> str:
        """"http" or "grpc"."""
        return self._target.protocol

    @property
    def url(self) -> str:
        return str(self._target)

    # ------------------------------------------------------------------ discovery
    def _require(self) -> dict[str, RemoteAPI]:
        state = self._state
        if state.closed:
            raise RuntimeError("the client is closed")
        if state.apis is None:
            raise RuntimeError("the client is not connected: use `async with "
                               "AsyncClient(url) as client` or `await AsyncClient.connect(url)`")
        return state.apis

    def _api(self, name: str) -> RemoteAPI:
        apis = self._require()
        api = apis.get(name) or apis.get(self._state.aliases.get(name, ""))
        if api is None:
            raise NotFound(f"{self._target} has no API {name!r}; it has: "
                           f"{', '.join(apis) or 'none'}")
        return api

    def list_apis(self) -> list[APIInfo]:
        """Every API: name, doc, inputs and output (type summaries), stream, root input."""
        return [api.info() for api in self._require().values()]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        state = self.__dict__.get("_state")
        apis = state.apis if state is not None else None
        if apis is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r} (the APIs "
                                 "appear once the client is connected)")
        if name not in apis and name not in state.aliases:
            raise AttributeError(f"{self._target} has no API {name!r}; it has: "
                                 f"{', '.join(apis) or 'none'}")
        api = self._api(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            return self._start(api, args, kwargs)

        method.__name__ = api.name
        method.__doc__ = api.doc
        return method

    def __dir__(self) -> list[str]:
        state = self.__dict__.get("_state")
        return sorted({*super().__dir__(), *((state.apis if state else None) or {})})

    # ------------------------------------------------------------------ calls
    def call(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call an API by name (a coroutine; an AsyncStream for streaming APIs)."""
        return self._start(self._api(name), args, kwargs)

    def _start(self, api: RemoteAPI, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        values = api.bind(args, kwargs)  # TypeError here, at the call site
        if api.stream:
            return self._stream(api, values)
        return self._invoke(api, values)

    async def _invoke(self, api: RemoteAPI, values: dict[str, Any]) -> Any:
        self._require()
        result = await self._transport.call(api, values, self._options)
        return adapt_output(result, self._output_types.get(api.name))

    def _stream(self, api: RemoteAPI, values: dict[str, Any]) -> AsyncStream:
        target = self._output_types.get(api.name)

        async def open_() -> Any:
            self._require()
            return await self._transport.open_stream(api, values, self._options)

        adapt = (lambda chunk: adapt_output(chunk, target)) if target is not None else None
        return AsyncStream(open_, adapt)

    async def is_ready(self) -> bool:
        """Whether the server answers ready (HTTP /readyz, gRPC health SERVING)."""
        self._require()
        return await self._transport.is_ready(self._options)

    def with_options(self, *, timeout: float | None = _KEEP, retries: int = _KEEP,
                     backoff: float = _KEEP, headers: Mapping[str, str] | None = None,
                     output_types: Mapping[str, Any] | None = None) -> AsyncClient:
        """A view of this client with other call options, sharing its connection.

        `client.with_options(timeout=2, retries=3).summarize(text=...)`. Closing a view
        does nothing; close the client it came from.
        """
        changes = {k: v for k, v in (("timeout", timeout), ("retries", retries),
                                     ("backoff", backoff)) if v is not _KEEP}
        view = copy.copy(self)
        view._options = self._options.merged(headers=headers, **changes)
        if output_types is not None:
            view._output_types = {**self._output_types, **validate_output_types(output_types)}
        view._owner = False
        return view

    def __repr__(self) -> str:
        state = ("closed" if self._state.closed else
                 "connected" if self._state.apis is not None else "new")
        return f"<{type(self).__name__} {self._target} ({state})>"
