"""`tensorwire.Context`: what an API method may know and set about its request.

Declared as a parameter of any name (`ctx: tensorwire.Context`), it is injected and never
part of the contract. The same object shape serves both protocols: `request.headers` are
HTTP headers or gRPC metadata; `response.headers` become HTTP headers or gRPC initial
metadata; `response.status_code` sets the HTTP status (gRPC answers OK unless the
method raises).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from .tempdirs import TempDirs, default_pool


class Pending(Protocol):
    """Work still running in a thread (a `concurrent.futures.Future`, a handoff `Job`)."""

    def done(self) -> bool: ...

    def add_done_callback(self, callback: Callable[[Any], object]) -> None: ...

#: What a transport hands to `Headers`: a mapping, pairs, or a function returning either.
HeaderSource: TypeAlias = (
    Mapping[str, Any] | Iterable[tuple[str, Any]]
    | Callable[[], Mapping[str, Any] | Iterable[tuple[str, Any]]]
)


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only request headers / metadata (first value wins).

    Built lazily: the transport hands over its own header object (or a function that
    returns the pairs) and nothing is copied unless a method reads a header, so requests
    whose method never looks cost nothing.
    """

    __slots__ = ("_items", "_source")

    def __init__(self, items: HeaderSource | None = None) -> None:
        self._source = items
        self._items: dict[str, str] | None = None

    @property
    def _store(self) -> dict[str, str]:
        store = self._items
        if store is None:
            items = self._source
            if callable(items):
                items = items()
            pairs = items.items() if isinstance(items, Mapping) else (items or [])
            store = {}
            for k, v in pairs:
                store.setdefault(k.lower(), v if isinstance(v, str) else v.decode("latin-1"))
            self._items = store
            self._source = None
        return store

    def __getitem__(self, key: str) -> str:
        return self._store[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._store)

    def __len__(self) -> int:
        return len(self._store)

    def __repr__(self) -> str:
        return f"Headers({self._store!r})"


class RequestInfo:
    """The incoming request, protocol-neutral.

    `peer` and `id` are resolved on first read: most requests never need them, and
    making a request id (or asking the transport for the peer address) per request is
    measurable at tens of thousands of requests per second (bench/NOTES.md).
    """

    __slots__ = ("_id", "_peer", "api", "headers", "protocol")

    def __init__(self, protocol: str, api: str, headers: Headers,
                 peer: str | Callable[[], str | None] | None = None,
                 request_id: str | None = None) -> None:
        self.protocol = protocol  # "http" or "grpc"
        self.api = api
        self.headers = headers
        self._peer = peer
        self._id = request_id

    @property
    def peer(self) -> str | None:
        peer = self._peer
        if callable(peer):
            peer = self._peer = peer()
        return peer

    @property
    def id(self) -> str:
        """Correlates the client's error body with the server's log line: the client's
        `X-Request-ID` header (gRPC `x-request-id` metadata), else a new random id."""
        if self._id is None:
            self._id = self.headers.get("x-request-id") or os.urandom(8).hex()
        return self._id

    @id.setter
    def id(self, value: str) -> None:
        self._id = value


class ResponseInfo:
    """What the method sets on its response."""

    __slots__ = ("headers", "status_code")

    def __init__(self) -> None:
        self.status_code: int = 200
        self.headers: dict[str, str] = {}


class Context:
    """Per-request state injected into API methods that declare it.

    It is also the scope codecs decode a request in (`tensorwire.codecs.Scope`): the
    transport hands it over, so an upload lands in `temp_dir` and a decoder sees the
    server's `limits`.
    """

    #: Codecs decoding with this scope are reading a request (not a reply).
    reading_request = True

    __slots__ = ("_cancelled", "_closed", "_lock", "_pending", "_temp_dir", "_temp_dirs",
                 "limits", "request", "response", "state")

    def __init__(self, request: RequestInfo, *, temp_dirs: TempDirs | None = None,
                 limits: Mapping[str, Any] | None = None) -> None:
        self.request = request
        self.response = ResponseInfo()
        #: Free-form per-request storage for the method's own use.
        self.state: dict[str, Any] = {}
        #: Server limits codecs consult while decoding (Settings.extra: max_image_pixels...).
        self.limits: Mapping[str, Any] = limits if limits is not None else {}
        self._temp_dirs = temp_dirs
        self._temp_dir: Path | None = None
        # A plain flag, not a threading.Event (whose Condition and lock cost more than the
        # rest of the Context): it only ever goes False -> True, and a bool attribute is
        # read and written atomically, so sync methods in the pool may poll it.
        self._cancelled = False
        self._lock = threading.Lock()
        self._pending: Pending | None = None
        self._closed = False

    @property
    def temp_dir(self) -> Path:
        """A private directory for this request, removed (with its files) when it ends.

        Created on first use, from the server's pool of per-request directories.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the request has ended: its temp_dir is gone")
            if self._temp_dir is None:
                if self._temp_dirs is None:
                    self._temp_dirs = default_pool()
                self._temp_dir = self._temp_dirs.acquire()
            return self._temp_dir

    @property
    def cancelled(self) -> bool:
        """True once the client went away or the deadline passed: long sync work may poll it."""
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True

    def close_after(self, future: Pending) -> None:
        """Defer `close()`'s cleanup until `future` (the method's thread) is done.

        A cancelled request's sync method runs on in its thread and may still be
        writing into the temp dir; its files go when it returns, not under its feet.
        """
        if not future.done():
            self._pending = future

    def close(self) -> None:
        """End of the request: the temp dir goes, whatever happened."""
        pending, self._pending = self._pending, None
        if pending is not None and not pending.done():
            pending.add_done_callback(lambda _: self._finish())
            return
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            self._closed = True
            path, self._temp_dir = self._temp_dir, None
        if path is not None and self._temp_dirs is not None:
            self._temp_dirs.release(path)
