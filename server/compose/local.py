"""An in-process dependency: its calls go through its request plans, with no bytes.

A call of `self.model.classify(x=arr)` to a service served in the same process takes
the path a request to it takes, minus the wire:

- its values are validated by the API's own decoder (`Decoder.read_values_decoder`:
  the model of its inputs, as gRPC's values are), so the dependency sees exactly what a
  request would give it and refuses what a request would be refused; a tensor of the
  declared framework is checked in place and reaches the method as the same object
  (no copy), a pydantic model as the same instance, a file as the same path;
- it runs through the API's `RequestPlan` (`run`, `open` for a generator API, `feed`
  for a streamed input), so a batchable API's call joins the batches of every other
  caller (HTTP, gRPC, other pipelines), under the dependency's own time limit
  tightened by the calling request's remaining time;
- it is counted in the dependency's metrics and access log as protocol `inprocess`,
  with the status a request would have got. It is not refused by `max_concurrency` or
  the drain: the request that makes it was admitted, and turning its inner calls away
  halfway would waste what it did (it still counts as in flight, so a drain waits for
  it, and so does an unload of the dependency: model control); it is refused, 503,
  while the dependency is not loaded;
- its `Context` (for an API that declares one or takes files) carries the calling
  request's headers and request id, and shares its temp dir: a file the dependency
  writes there lives until the calling request ends, so the caller can return it;
- it runs in the calling request's task (an `async def` caller), or in a task of its
  own that the request's `CallFrame` cancels with it (a `def` caller's thread).

Its failures are the caller's as `compose.dependency_failures` maps them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..client.streams import elements
from ..context import Context, Headers, RequestInfo
from ..contract.decoding import Decoder
from ..errors import ServiceUnavailable, TensorwireError, as_error
from ..runtime import call_frame
from ..runtime.call_frame import CallFrame
from ..runtime.plan import RequestPlan
from .calls import Inputs
from .dependency_failures import dependency_error

#: The protocol label of in-process calls (metrics, access lines, RequestInfo).
PROTOCOL = "inprocess"
_NO_HEADERS = Headers(())


class InnerContext(Context):
    """The Context of an in-process call made for a request: its headers and id, its
    temp dir (the calling request's: removed when that request ends) and its
    cancellation."""

    __slots__ = ("_outer",)

    def __init__(self, request: RequestInfo, outer: Context,
                 limits: Mapping[str, Any]) -> None:
        super().__init__(request, limits=limits)
        self._outer = outer

    @property
    def temp_dir(self) -> Any:
        return self._outer.temp_dir

    @property
    def cancelled(self) -> bool:
        return self._cancelled or self._outer.cancelled

    def close_after(self, future: Any) -> None:
        """Nothing to defer: the temp dir is the calling request's."""

    def close(self) -> None:
        """Nothing of its own to remove (see `temp_dir`)."""


class LocalAPI:
    """One API of an in-process dependency (a `calls.Target`)."""

    def __init__(self, dependency: str, plan: RequestPlan,
                 keep: Callable[[Context], None] | None = None) -> None:
        api = plan.api
        self.plan = plan
        self.name = api.name
        self.where = f"{dependency}.{api.name}"
        self.is_async = api.is_async
        self.stream = api.output.stream
        self.inputs = Inputs.of(api)
        decoder = Decoder(api)
        self._decode = decoder.read_values_decoder()
        self._element = self.inputs.stream_in
        #: Where a Context made for a call outside any request goes when the call is
        #: over (None: closed at once). Standalone use keeps them for its lifetime.
        self._keep = keep
        self._series: tuple[Any, Any] = (None, None)

    async def kind(self) -> bool:
        return self.stream

    # ------------------------------------------------------------------ the steps
    def _begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[CallFrame | None, RequestInfo, Context | None, dict[str, Any]]:
        frame = call_frame.current()
        if frame is not None:
            frame.check()
        plan = self.plan
        if not plan.ready:
            raise ServiceUnavailable(f"dependency {self.where} is unavailable: "
                                     f"{plan.refusal.message}")
        values = self.inputs.bind(args, kwargs)
        if frame is not None:
            outer = frame.info
            info = RequestInfo(PROTOCOL, self.name, outer.headers, None, outer.id)
        else:
            info = RequestInfo(PROTOCOL, self.name, _NO_HEADERS)
        ctx: Context | None = None
        if plan.needs_context:
            limits = plan.runtime.settings.extra
            ctx = (InnerContext(info, frame.ctx, limits) if frame is not None
                   else plan.context(info))
        return frame, info, ctx, values

    def _arguments(self, values: dict[str, Any], ctx: Context | None) -> dict[str, Any]:
        """The validated arguments (a streamed input: validated per element)."""
        name = self._element
        if name is None:
            return self._decode(values)
        decode = self._decode
        return self.plan.feed(elements(values.get(name, ())),
                              lambda value, scope: decode({name: value}),
                              ctx if ctx is not None else self.plan.scope)

    @property
    def public(self) -> str:
        """The API's name in the dependency's metrics and access lines."""
        return self.plan.runtime.public(self.name)

    def _series_of(self) -> tuple[Any, Any]:
        admission = self.plan.runtime.admission
        held, series = self._series
        if held is not admission:  # the first call, or a server's new admission
            # under the name its metrics carry (`model.classify` under a prefix)
            series = admission.series(PROTOCOL, self.public)
            self._series = (admission, series)
        return admission, series

    def _end(self, admission: Any, series: Any, start: float, status: str,
             info: RequestInfo, ctx: Context | None, frame: CallFrame | None) -> None:
        admission.leave(series, start, PROTOCOL, self.public, status, 0, 0, info)
        if ctx is not None and frame is None:
            if self._keep is not None:
                self._keep(ctx)
            else:
                ctx.close()

    def _failed(self, exc: BaseException) -> tuple[str, BaseException]:
        """The status the dependency answered, and what the caller raises."""
        status = str(as_error(exc).status_code) if isinstance(exc, Exception) else "499"
        return status, dependency_error(self.where, exc)

    # ------------------------------------------------------------------ calls
    async def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The API's result, through its plan."""
        frame, info, ctx, values = self._begin(args, kwargs)
        owner = self.plan.owner  # an unload of the dependency waits for the call
        owner.calls += 1
        admission, series = self._series_of()
        start = admission.enter(series)
        status = "200"
        try:
            arguments = self._arguments(values, ctx)
            finished, value = self.plan.run(arguments, ctx,
                                            frame.remaining if frame is not None else None)
            return value if finished else await value
        except asyncio.CancelledError:
            status = "499"
            if ctx is not None:
                ctx.cancel()
            raise
        except Exception as exc:
            status, error = self._failed(exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            owner.calls -= 1
            self._end(admission, series, start, status, info, ctx, frame)

    async def chunks(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                     ) -> AsyncIterator[Any]:
        """A generator API's chunks, through its plan (`open`): its per-chunk time
        limit counts the making of each chunk, never the caller's time with it."""
        frame, info, ctx, values = self._begin(args, kwargs)
        owner = self.plan.owner
        owner.calls += 1
        admission, series = self._series_of()
        start = admission.enter(series)
        status = "200"
        stream = None
        try:
            stream = self.plan.open(self._arguments(values, ctx), ctx)
            mark = stream.mark
            async for chunk in stream.chunks:
                mark.made += 1
                mark.holding = True
                yield chunk
                mark.holding = False
        except asyncio.CancelledError:
            status = "499"
            if stream is not None:
                try:
                    stream.check()
                except TensorwireError as exc:  # its own per-chunk limit
                    status, error = self._failed(exc)
                    raise error from exc
            raise
        except GeneratorExit:
            status = "499"  # the caller stopped reading
            raise
        except Exception as exc:
            status, error = self._failed(exc)
            if error is exc:
                raise
            raise error from exc
        finally:
            if stream is not None:
                await stream.aclose()
            owner.calls -= 1
            self._end(admission, series, start, status, info, ctx, frame)


class LocalBackend:
    """A dependency served in this process, reached through its plans."""

    def __init__(self, name: str, plans: Mapping[str, RequestPlan],
                 keep: Callable[[Context], None] | None = None) -> None:
        self.name = name
        self._apis = {api: LocalAPI(name, plan, keep) for api, plan in plans.items()}

    def api(self, name: str) -> LocalAPI:
        target = self._apis.get(name)
        if target is None:
            raise AttributeError(f"dependency {self.name} has no API {name!r}; it has: "
                                 f"{', '.join(self._apis) or 'none'}")
        return target

    def names(self) -> list[str]:
        return list(self._apis)

    async def close(self) -> None:
        """Nothing to release: the dependency's runtime is the server's."""
