"""`tensorwire.Context`: what an API method may know and set about its request.

Declared as a parameter of any name (`ctx: tensorwire.Context`), it is injected and never
part of the contract. The same object shape serves both protocols: `request.headers` are
HTTP headers or gRPC metadata; `response.headers` become HTTP headers or gRPC initial
metadata; `response.status_code` sets the HTTP status (gRPC answers OK unless the
method raises).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


class Headers(Mapping[str, str]):
    """Case-insensitive, read-only request headers / metadata (first value wins)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | list[tuple[str, str]] | None = None) -> None:
        pairs = items.items() if isinstance(items, Mapping) else (items or [])
        store: dict[str, str] = {}
        for k, v in pairs:
            store.setdefault(k.lower(), v if isinstance(v, str) else v.decode("latin-1"))
        self._items = store

    def __getitem__(self, key: str) -> str:
        return self._items[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Headers({self._items!r})"


class RequestInfo:
    """The incoming request, protocol-neutral."""

    __slots__ = ("api", "headers", "id", "peer", "protocol")

    def __init__(self, protocol: str, api: str, headers: Headers, peer: str | None = None,
                 request_id: str = "") -> None:
        self.protocol = protocol  # "http" or "grpc"
        self.api = api
        self.headers = headers
        self.peer = peer
        #: Correlates the client's error body with the server's log line.
        self.id = request_id


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
        self._cancelled = threading.Event()

    @property
    def temp_dir(self) -> Path:
        """A private directory for this request, removed (with its files) when it ends."""
        if self._temp_dir is None:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="tensorwire-req-"))
        return self._temp_dir

    @property
    def cancelled(self) -> bool:
        """True once the client went away or the deadline passed: long sync work may poll it."""
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()

    def close(self) -> None:
        """End of the request: the temp dir goes, whatever happened."""
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
