"""One service of a server with several: its contract as served, its plans, its runtime.

A server holds one or more services (`tensorwire serve a:A b:B`). Each has its own
`ServiceRuntime` (its instance, threads, batchers and time limit) and shares the
server's one admission gate (so `max_concurrency` and the drain stay per worker) and
tracing. A service may be served under a prefix: its routes under `/<prefix>` and its
APIs' model names (v2 models, metrics labels) `<prefix>.<api>`; its gRPC service keeps
its own full name, which a prefix does not change (the `.proto` is the code's contract).

The request plans of its APIs belong to it, not to a runtime: the transports' routes
hold them for the server's lifetime, and a runtime binds them when it starts. Loading
a service (model control) starts a new runtime on the same plans.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..contract.descriptor import ServiceSpec
from ..settings import Settings
from .admission import Admission
from .plan import RequestPlan
from .service import ServiceRuntime


@dataclass(frozen=True)
class Placement:
    """How a server serves one service."""

    #: Its routes under `/<prefix>`, its models named `<prefix>.<api>` ("": neither).
    prefix: str = ""
    #: Its own settings (threads, time limit...; None: the server's).
    settings: Settings | None = None
    #: Whether it is loaded when the server starts (model control may load it later).
    load: bool = True
    #: What named it (`MODULE:Class`), for messages.
    target: str = ""


def prefixed(spec: ServiceSpec, prefix: str) -> ServiceSpec:
    """The service as served under `prefix`: every API's route under `/<prefix>` (the
    spec itself when there is none)."""
    if not prefix:
        return spec
    apis = {name: dataclasses.replace(api, route=f"/{prefix}{api.route}")
            for name, api in spec.apis.items()}
    return dataclasses.replace(spec, apis=apis)


class Hosted:
    """One service of the server: its spec as served, its plans, its current runtime."""

    def __init__(self, spec: ServiceSpec, settings: Settings, placement: Placement,
                 admission: Admission, tracing: object) -> None:
        #: The service as its code declares it (its own schema.json, its gRPC contract).
        self.declared = spec
        self.placement = placement
        self.prefix = placement.prefix
        #: The service as served: its routes under the prefix.
        self.spec = prefixed(spec, self.prefix)
        self.settings = placement.settings or settings
        self.target = placement.target or spec.name
        self._admission = admission
        self._tracing = tracing
        #: API name -> its plan, for the server's lifetime.
        self.plans = {name: RequestPlan(api) for name, api in self.spec.apis.items()}
        self.runtime = self.fresh_runtime()
        #: Whether it is to be loaded (the server is not ready until it is).
        self.wanted = placement.load

    @classmethod
    def of(cls, runtime: ServiceRuntime) -> Hosted:
        """A server's one service around a runtime made elsewhere (its own plans)."""
        hosted = cls.__new__(cls)
        hosted.declared = hosted.spec = runtime.spec
        hosted.placement = Placement()
        hosted.prefix = ""
        hosted.settings = runtime.settings
        hosted.target = runtime.spec.name
        hosted._admission = runtime.admission
        hosted._tracing = runtime.tracing
        hosted.plans = {name: runtime.plan(name) for name in runtime.spec.apis}
        hosted.runtime = runtime
        hosted.wanted = True
        return hosted

    def public(self, api: str) -> str:
        """The name an API's model and metrics carry: `<prefix>.<api>` under a prefix."""
        return f"{self.prefix}.{api}" if self.prefix else api

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def ready(self) -> bool:
        return self.runtime.ready

    def fresh_runtime(self) -> ServiceRuntime:
        """A new runtime for the service (not started), on its plans."""
        return ServiceRuntime(self.spec, self.settings, admission=self._admission,
                              tracing=self._tracing, plans=self.plans,  # type: ignore[arg-type]
                              names=self.public)

    async def start(self) -> None:
        """Instantiate the service (its `__init__`: the model loads) and take calls."""
        await self.runtime.start()

    async def close(self) -> None:
        await self.runtime.close()
