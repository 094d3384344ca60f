"""A server's dependencies: the services it runs for being depended on, the order it
starts its services in, and the handles each instance gets.

`tensorwire serve pipeline:Pipeline` serves `Pipeline` and runs, in the same process,
every dependency not placed elsewhere (`compose.placement`), so that its calls go
through the dependency's request plans. Such a dependency is the pipeline's part, not
the server's: it has its own runtime (instance, threads, batchers, time limit) and its
calls count in the metrics under its own name (`model.classify`, protocol `inprocess`),
but it has no routes of its own: the server's `/schema.json`, OpenAPI document, gRPC
reflection and v2 repository describe the pipeline alone, and a client pointed at the
server reaches the pipeline. To expose the dependency too (for direct callers, whose
calls then batch with the pipeline's), serve it as well: `tensorwire serve
pipeline:Pipeline model:Model` (a prefix as usual: `model=model:Model`); the pipeline
then calls that one.

The server starts its services dependencies first; before each starts, its instance's
handles are placed (its `__init__` may call a dependency), and afterwards they are its
plain attributes. A service loaded again later (model control) finds them placed still.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from ..contract import dependency
from ..contract.descriptor import ServiceSpec
from ..runtime.admission import Admission
from ..runtime.hosted import Hosted, Placement
from ..settings import Settings
from .placement import Composition, parse_placements


def composition_of(specs: Sequence[ServiceSpec], settings: Settings) -> Composition:
    """The placement of `specs`' dependencies under `settings` (PlacementError: why
    they cannot be placed so)."""
    return Composition(specs, parse_placements(settings.dependencies),
                       token=settings.auth_token)


class Dependencies:
    """The dependencies of a server's hosted services (see the module docstring):
    `services` are those the server serves; the in-process dependencies among none of
    them are hosted here, on the server's admission and tracing, without routes."""

    def __init__(self, services: Sequence[Hosted], settings: Settings,
                 admission: Admission, tracing: Any) -> None:
        self.composition = composition_of([h.declared for h in services], settings)
        #: The dependencies run here for being depended on (no routes).
        self.internal = [Hosted(spec, settings, Placement(prefix=spec.name.lower(),
                                                          target=f"{spec.name} (a dependency)"),
                                admission, tracing)
                         for spec in self.composition.added]
        by_class = {h.declared.cls: h for h in [*services, *self.internal]}
        self._hosted = by_class
        #: Every service in the order they start: dependencies first.
        self.order = [by_class[spec.cls] for spec in self.composition.order]
        self._handles: dict[type, dict[str, Any]] = {}
        self._tokens: list[Any] = []

    def _plans(self, spec: ServiceSpec) -> Any:
        return self._hosted[spec.cls].plans

    def before(self, service: Hosted) -> None:
        """Place `service`'s handles, just before it starts (in the task that starts
        it, on the server's loop: its `__init__` runs in that context)."""
        spec = service.declared
        handles = self._handles.get(spec.cls)
        if handles is None:
            handles = self.composition.handles(spec, self._plans, asyncio.get_running_loop())
            self._handles[spec.cls] = handles
            self.composition.place(spec, handles)
        if handles:
            self._tokens.append(self.composition.placing(spec, handles))

    def after(self, service: Hosted) -> None:
        """`service` started: its handles become its instance's plain attributes."""
        while self._tokens:
            dependency.placing.reset(self._tokens.pop())
        handles = self._handles.get(service.declared.cls)
        if handles and service.runtime.instance is not None:
            self.composition.settle(service.runtime.instance, handles)

    async def close(self) -> None:
        """After the server's services: stop the internal dependencies (dependents
        first), close the clients of remote ones."""
        for service in reversed(self.internal):
            with contextlib.suppress(Exception):
                await service.close()
        await self.composition.close()
