"""Services and their in-process dependencies started together, without transports.

A server places its services' dependencies and starts them through its hosted
services; a `Group` does the same over bare `ServiceRuntime`s: for an instance made by
hand outside any server (`compose.standalone`), and for tests of composition itself.
Each service's dependencies start first; each service's instance gets its handles
before its `__init__` runs (`Composition.place`).

    group = Group(Pipeline, placements={"Model": "grpc://model:50051"})
    await group.start()
    pipeline = group.instance(Pipeline)
    ...
    await group.close()
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from ..context import Context
from ..contract import dependency
from ..contract.descriptor import ServiceSpec
from ..contract.sdk import get_service_spec
from ..runtime.plan import RequestPlan
from ..runtime.service import ServiceRuntime
from ..settings import Settings
from .placement import Composition


class Group:
    """Runtimes of `services` and of every dependency placed in-process."""

    def __init__(self, services: type | ServiceSpec | Sequence[type | ServiceSpec],
                 settings: Settings | None = None,
                 placements: Mapping[str, str] | None = None, *,
                 keep_contexts: bool = False) -> None:
        given = services if isinstance(services, Sequence) else [services]
        specs = [s if isinstance(s, ServiceSpec) else get_service_spec(s) for s in given]
        self.settings = settings or Settings()
        self.composition = Composition(specs, placements, token=self.settings.auth_token)
        self.runtimes: dict[type, ServiceRuntime] = {}
        #: Contexts of calls made outside any request, kept until `close` (an instance
        #: made by hand may hold on to a file its dependency returned).
        self.kept: list[Context] | None = [] if keep_contexts else None

    def _plans(self, spec: ServiceSpec) -> Mapping[str, RequestPlan]:
        runtime = self.runtimes[spec.cls]
        return {name: runtime.plan(name) for name in spec.apis}

    async def start(self) -> Group:
        """Start every service, dependencies first; on a failure, stop those started."""
        loop = asyncio.get_running_loop()
        keep = self.kept.append if self.kept is not None else None
        try:
            for spec in self.composition.order:
                handles = self.composition.handles(spec, self._plans, loop, keep)
                self.composition.place(spec, handles)
                runtime = ServiceRuntime(spec, self.settings)
                self.runtimes[spec.cls] = runtime
                token = self.composition.placing(spec, handles)
                try:
                    await runtime.start()
                finally:
                    dependency.placing.reset(token)
                self.composition.settle(runtime.instance, handles)
        except BaseException:
            await self.close()
            raise
        return self

    def runtime(self, cls: type) -> ServiceRuntime:
        return self.runtimes[cls]

    def instance(self, cls: type) -> Any:
        """The started instance of the service class `cls`."""
        return self.runtimes[cls].instance

    async def close(self) -> None:
        """Stop the services, dependents first; close remote dependencies' clients."""
        for runtime in reversed(list(self.runtimes.values())):
            with contextlib.suppress(Exception):
                await runtime.close()
        self.runtimes.clear()
        await self.composition.close()
        for ctx in self.kept or ():
            ctx.close()
