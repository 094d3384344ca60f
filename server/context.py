"""`tensorwire.Context`: what an API method may know and set about its request.

Declared as a parameter of any name (`ctx: tensorwire.Context`), it is injected and never
part of the contract. The same object shape serves both protocols: `request.headers` are
HTTP headers or gRPC metadata; `response.headers` become HTTP headers or gRPC initial
metadata; `response.status_code` sets the HTTP status (gRPC answers OK unless the
method raises).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias

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
    measurable at tens of thousands of requests per second (bench/README.md).
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
    """Per-request state injected into API methods that declare it."""

    __slots__ = ("_cancelled", "_temp_dir", "request", "response", "state")

    def __init__(self, request: RequestInfo) -> None:
        self.request = request
        self.response = ResponseInfo()
        #: Free-form per-request storage for the method's own use.
        self.state: dict[str, Any] = {}
        self._temp_dir: Path | None = None
        # A plain flag, not a threading.Event (whose Condition and lock cost more than the
        # rest of the Context): it only ever goes False -> True, and a bool attribute is
        # read and written atomically, so sync methods in the pool may poll it.
        self._cancelled = False

    @property
    def temp_dir(self) -> Path:
        """A private directory for this request, removed (with its files) when it ends."""
        if self._temp_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="tensorwire-req-"))
        return self._temp_dir

    @property
    def cancelled(self) -> bool:
        """True once the client went away or the deadline passed: long sync work may poll it."""
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True

    def close(self) -> None:
        """End of the request: the temp dir goes, whatever happened."""
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
