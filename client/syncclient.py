"""`tensorwire.SyncClient`: the same client for plain (blocking) code.

    with tensorwire.SyncClient("grpc://localhost:50051") as client:
        client.summarize(text="...", max_words=4)
        for letter in client.spell(word="hi"):
            ...

It runs an `AsyncClient` on the process's client event loop, in a daemon thread that
every SyncClient shares (`tensorwire.client.loop.shared_loop`), so both clients share
one implementation, and behave identically on both protocols.

Thread-safety: a SyncClient may be shared by any number of threads. Every call is
handed to the client's loop, which owns the one HTTP session / gRPC channel pool; calls
from different threads run concurrently over it (HTTP keeps a pool of connections, gRPC
a few channels, see `tensorwire.client.channels`). Connect once and share the client; do
not call it from inside its own callbacks' loop (that is a RuntimeError), and use
AsyncClient in async code.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from .api import APIInfo, RemoteAPI
from .asyncclient import _KEEP, AsyncClient
from .loop import LoopThread, shared_loop
from .streams import SyncStream


def _shutdown(loop: LoopThread, client: AsyncClient) -> None:
    if loop.running:
        try:
            loop.run(client.close())
        except Exception:
            pass


class _ClosedLoop:
    """What a closed client's calls go to."""

    running = False

    def run(self, coro: Any) -> Any:
        coro.close()
        raise RuntimeError("the client is closed")

    def submit(self, coro: Any) -> None:
        coro.close()


_CLOSED = _ClosedLoop()


class SyncClient:
    """A blocking client of one tensorwire service; takes AsyncClient's arguments.

    Connects (and discovers the APIs) in the constructor; `close()` or a `with` block
    releases the connection, the loop thread and the directory of file outputs.
    """

    def __init__(self, url: str, **kwargs: Any) -> None:
        self._async = AsyncClient(url, **kwargs)
        self._loop = shared_loop()
        try:
            self._loop.run(self._async._connect())
        except BaseException:
            _shutdown(self._loop, self._async)
            raise
        self._finalizer = weakref.finalize(self, _shutdown, self._loop, self._async)

    @classmethod
    def _view(cls, loop: LoopThread, client: AsyncClient) -> SyncClient:
        view = cls.__new__(cls)
        view._async = client
        view._loop = loop
        view._finalizer = None
        return view

    def close(self) -> None:
        """Close the connection, remove file outputs' directory; a call from now on is
        a RuntimeError (the shared loop thread goes on for the process's other clients)."""
        if self._finalizer is not None:
            self._finalizer()
            self._loop = _CLOSED  # type: ignore[assignment]

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def protocol(self) -> str:
        return self._async.protocol

    @property
    def url(self) -> str:
        return self._async.url

    def list_apis(self) -> list[APIInfo]:
        return self._async.list_apis()

    def is_ready(self) -> bool:
        return self._loop.run(self._async.is_ready())

    def call(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call an API by name (its result; a SyncStream for streaming APIs)."""
        return self._start(self._async._api(name), args, kwargs)

    def _start(self, api: RemoteAPI, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        values = api.bind(args, kwargs)
        if api.stream:
            stream = self._async._stream(api, values)
            self._loop.run(stream._start())  # errors before the first chunk raise here
            return SyncStream(stream, self._loop)
        return self._loop.run(self._async._invoke(api, values))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        client = self.__dict__.get("_async")
        if client is None:
            raise AttributeError(name)
        getattr(client, name)  # AttributeError naming the APIs when there is none
        api = client._api(name)

        def method(*args: Any, **kwargs: Any) -> Any:
            return self._start(api, args, kwargs)

        method.__name__ = api.name
        method.__doc__ = api.doc
        return method

    def __dir__(self) -> list[str]:
        client = self.__dict__.get("_async")
        names = (client._state.apis or {}) if client is not None else {}
        return sorted({*super().__dir__(), *names})

    def with_options(self, *, timeout: float | None = _KEEP, retries: int = _KEEP,
                     backoff: float = _KEEP, headers: Mapping[str, str] | None = None,
                     output_types: Mapping[str, Any] | None = None) -> SyncClient:
        """A view with other call options sharing this client (see AsyncClient)."""
        view = self._async.with_options(timeout=timeout, retries=retries, backoff=backoff,
                                        headers=headers, output_types=output_types)
        return SyncClient._view(self._loop, view)

    def __repr__(self) -> str:
        return repr(self._async).replace("AsyncClient", "SyncClient", 1)
