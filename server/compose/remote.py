"""A dependency placed elsewhere: its calls go through tensorwire's own client.

`--dependency Model=grpc://model:50051` (or `depends(url=...)`) sends the calls of
`self.model` over the native gRPC contract (`http://` works too): the client's typed
encoding (tensors as `tensorwire.v1.Tensor` byte buffers, read back with `frombuffer`),
its channel pool (`channels`: calls spread over the dependency's workers; a
`dns:///` name over every address of a headless Service, round robin), and its error
classes. What crosses each call:

- the calling request's remaining time, as the call's timeout (the gRPC deadline,
  which the dependency's plan then honours); a request with no time left makes no call;
- its trace context: the current span's when this server traces (the client injects
  it), else the request's own `traceparent` / `tracestate` as it came in;
- its request id, as `x-request-id`;
- the deployment's auth token (`auth_token`), as the bearer token;
- its cancellation: the call runs in the request's task, or in one its frame cancels.

Results are typed by the dependency's contract when it is known (`depends(Model)` or
`depends(on=Model, url=...)`): tensors as the declared framework's tensors, models as
the model class, by the output's own validator. A file the dependency returns is moved
into the calling request's temp dir, so it goes when that request ends.

The client connects on the first call (reflection: the service's own contract), with
a short connect timeout; a dependency that cannot be reached fails that call, and those
of the next `RETRY_AFTER` seconds, at once with 503 naming it, then is tried again.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..client import AsyncClient, tracecontext
from ..client.target import parse_target
from ..contract.descriptor import APISpec, ServiceSpec
from ..errors import DeadlineExceeded, ServerUnreachable, TensorwireError
from ..runtime import call_frame
from ..runtime.call_frame import CallFrame
from .calls import Inputs
from .dependency_failures import dependency_error

#: Seconds a dependency gets to accept a connection (its discovery included).
CONNECT_TIMEOUT = 5.0
#: Seconds after a failed connect during which calls fail at once (then it is retried).
RETRY_AFTER = 1.0
_TRACE_HEADERS = ("traceparent", "tracestate")


class RemoteBackend:
    """A dependency at a URL, reached through an `AsyncClient` made on first use."""

    def __init__(self, name: str, url: str, spec: ServiceSpec | None = None, *,
                 token: str | None = None, channels: int | None = None,
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.name = name
        self.url = url
        self.target = parse_target(url)  # a bad URL fails placement, not the first call
        self.spec = spec
        self._options: dict[str, Any] = {"token": token, "connect_timeout": connect_timeout}
        if self.target.protocol == "grpc":
            self._options["channels"] = channels
            if spec is not None:  # a server of several services: this one's contract
                self._options["service"] = spec.grpc_service_name
        self._client: AsyncClient | None = None
        self._lock: asyncio.Lock | None = None
        self._failed: tuple[float, TensorwireError] | None = None
        self._apis: dict[str, RemoteAPI] = {}
        if spec is not None:
            self._apis = {n: RemoteAPI(self, n, api) for n, api in spec.apis.items()}

    def api(self, name: str) -> RemoteAPI:
        target = self._apis.get(name)
        if target is None:
            if self.spec is not None or self._client is not None:
                raise AttributeError(f"dependency {self.name} has no API {name!r}; it "
                                     f"has: {', '.join(self._apis) or 'none'}")
            target = self._apis[name] = RemoteAPI(self, name, None)  # known on connect
        return target

    def names(self) -> list[str]:
        return list(self._apis)

    async def client(self) -> AsyncClient:
        """The connected client (connecting now if it is not yet)."""
        client = self._client
        if client is not None:
            return client
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None:
                return self._client
            failed = self._failed
            if failed is not None and time.monotonic() - failed[0] < RETRY_AFTER:
                raise dependency_error(self.name, failed[1])
            try:
                await self._probe()
                client = await AsyncClient.connect(self.url, **self._options)
            except TensorwireError as exc:
                self._failed = (time.monotonic(), exc)
                raise dependency_error(self.name, exc) from None
            self._failed = None
            self._client = client
        return client

    async def _probe(self) -> None:
        """Tell a refused connection at once (the client's discovery would wait out its
        connect timeout for it); a name resolved by gRPC itself (`dns:`) is left to it."""
        target = self.target
        if target.resolver is not None:
            return
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(target.host, target.port),
                self._options["connect_timeout"])
        except (OSError, TimeoutError) as exc:
            raise ServerUnreachable(f"cannot connect to {target}: "
                                    f"{getattr(exc, 'strerror', None) or exc or 'timed out'}"
                                    ) from None
        writer.close()

    def headers(self, frame: CallFrame | None) -> dict[str, str]:
        """What crosses a call made for `frame`'s request (see the module docstring)."""
        if frame is None:
            return {}
        info = frame.info
        headers = {"x-request-id": info.id}
        current: dict[str, str] = {}
        tracecontext.inject(current)
        if not current:  # this server does not trace: pass the caller's trace on
            incoming = info.headers
            for key in _TRACE_HEADERS:
                value = incoming.get(key)
                if value:
                    headers[key] = value
        return headers

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()


class RemoteAPI:
    """One API of a remote dependency (a `calls.Target`)."""

    def __init__(self, backend: RemoteBackend, name: str, api: APISpec | None) -> None:
        self.backend = backend
        self.name = name
        self.where = f"{backend.name}.{name}"
        #: Known from the contract; a URL-only dependency's stream-ness is known once
        #: connected, and its methods' kind never (its handle asks where it is called).
        self.is_async = api.is_async if api is not None else None
        self.stream: bool | None = api.output.stream if api is not None else None
        self.inputs = Inputs.of(api) if api is not None else None
        self._adapter = api.output.adapter if api is not None else None

    async def kind(self) -> bool:
        if self.stream is None:
            client = await self.backend.client()
            found = [api for api in client.list_apis() if api.name == self.name]
            if not found:
                raise AttributeError(f"dependency {self.backend.name} has no API "
                                     f"{self.name!r}; it has: "
                                     f"{', '.join(a.name for a in client.list_apis())}")
            self.stream = found[0].stream
        return self.stream

    async def _view(self) -> tuple[Any, CallFrame | None]:
        """The client with this call's options: the request's remaining time as its
        timeout, and the headers that cross."""
        frame = call_frame.current()
        if frame is not None:
            frame.check()
        client = await self.backend.client()
        if self.stream is None:
            await self.kind()
        timeout = None
        if frame is not None:
            timeout = frame.remaining()
            if timeout is not None and timeout <= 0:
                raise DeadlineExceeded(f"dependency {self.where} not called: the request's "
                                       "time is up")
        headers = self.backend.headers(frame)
        if timeout is None and not headers:
            return client, frame
        return client.with_options(timeout=timeout, headers=headers), frame

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple, dict]:
        if self.inputs is None:
            return args, kwargs
        values = self.inputs.bind(args, kwargs)  # the in-process call's TypeErrors
        if self.inputs.root:
            return tuple(values.values()), {}
        return (), values

    def _typed(self, value: Any, frame: CallFrame | None) -> Any:
        if frame is not None:
            value = adopt_files(value, frame)
        if self._adapter is None:
            return value
        try:
            return self._adapter.validate_python(value)
        except Exception:  # the dependency's contract changed under it: as it came
            return value

    async def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        args, kwargs = self._bind(args, kwargs)
        client, frame = await self._view()
        try:
            value = await client.call(self.name, *args, **kwargs)
        except TensorwireError as exc:
            raise dependency_error(self.where, exc) from None
        return self._typed(value, frame)

    async def chunks(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> AsyncIterator[Any]:
        args, kwargs = self._bind(args, kwargs)
        client, frame = await self._view()
        stream = client.call(self.name, *args, **kwargs)
        try:
            while True:
                try:
                    chunk = await anext(stream)
                except StopAsyncIteration:
                    return
                except TensorwireError as exc:
                    raise dependency_error(self.where, exc) from None
                yield self._typed(chunk, frame)
        finally:
            await stream.aclose()


def adopt_files(value: Any, frame: CallFrame) -> Any:
    """`value` with every file the client saved for it moved into the request's temp
    dir (removed with it); looked for in the output itself, its lists, dicts and model
    fields."""
    if isinstance(value, Path):
        target = frame.ctx.temp_dir / f"{os.urandom(4).hex()}-{value.name}"
        shutil.move(value, target)  # a rename, unless the dirs are on two filesystems
        return target
    if isinstance(value, list):
        return [adopt_files(v, frame) for v in value]
    if isinstance(value, dict):
        return {k: adopt_files(v, frame) for k, v in value.items()}
    if isinstance(value, BaseModel):
        for key, item in value.__dict__.items():
            moved = adopt_files(item, frame)
            if moved is not item:
                object.__setattr__(value, key, moved)
    return value
