"""Model control: loading and unloading services while the server runs (Triton's model
repository extension, `--model-control explicit`).

The unit is a service: a v2 model is one API of one, and loading any of its models loads
all of them (one instance serves them together). The services a server can load are
the ones it was started with (`tensorwire serve a:A b:B`, `[[services]]`, a service
with `load = false` is known but not loaded): each was imported and its contract
checked against the others at start-up, so a load can never clash, and loading runs the
class's `__init__` (the model loads), which is the code a client makes the server run.
That is why it is off unless the operator turns it on; the index is always served.

- **load** a service that is not loaded: a new `ServiceRuntime` starts (its `__init__`
  in the runtime's threads), then its APIs' plans are bound to it and it takes calls.
  If `__init__` raises, the load fails with the error's first line (`LoadFailed`) and
  nothing changes.
- **load** a loaded one (Triton's reload: new weights on disk, say): a new runtime
  starts beside the old, the plans move to it at once (new calls go to the new
  instance), then the old runtime's calls in flight finish, within `graceful_timeout`,
  and it is closed. A failed reload leaves the old instance serving.
- **unload**: the plans refuse new calls (503 / UNAVAILABLE, saying how to load it
  again), the calls in flight finish within `graceful_timeout`, then the runtime is
  closed (its batchers, threads, the instance's `close()`), and the instance released.

Loads and unloads of one service are taken one at a time. Whoever changes what is
loaded hears of it (`listeners`): gRPC health and reflection, and, with several
workers, the worker's supervisor, which tells the other workers to follow
(`follow`: the same change, not relayed again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from ..errors import NotFound, PermissionDenied, ServiceUnavailable, TensorwireError
from .hosted import Hosted
from .service import InitFailure, ServiceRuntime

log = logging.getLogger("tensorwire.control")

LOAD, UNLOAD = "load", "unload"


class LoadFailed(TensorwireError):
    """A service could not be loaded (its `__init__` raised): 500 / INTERNAL, with the
    error's first line, which the operator's log has in full."""


def control_off() -> PermissionDenied:
    return PermissionDenied("model control is off: start the server with --model-control "
                            "explicit to load and unload models")


class ModelControl:
    """Loads and unloads the server's services (see the module docstring)."""

    def __init__(self, services: Sequence[Hosted], *, enabled: bool, grace: float,
                 draining: Callable[[], bool]) -> None:
        self.services = list(services)
        self.enabled = enabled
        self.grace = grace
        self._draining = draining
        self._locks = {id(s): asyncio.Lock() for s in self.services}
        #: Called with (operation, service) after each change this worker made or
        #: followed: (op, service, followed) -> awaitable.
        self.listeners: list[Callable[[str, Hosted, bool], Awaitable[None]]] = []

    # ------------------------------------------------------------------ names
    def service(self, name: str) -> Hosted:
        """The service of a model name (`iris.predict`), or of its own name or prefix."""
        for service in self.services:
            if name in (service.name, service.prefix) or any(
                    name == service.public(api) for api in service.spec.apis):
                return service
        known = ", ".join(service.public(api) for service in self.services
                          for api in service.spec.apis)
        raise NotFound(f"unknown model {name!r}; this server has: {known}")

    @staticmethod
    def unloaded(service: Hosted) -> ServiceUnavailable:
        """What a call of an unloaded service's API is answered."""
        first = service.public(next(iter(service.spec.apis)))
        return ServiceUnavailable(f"service {service.name} is not loaded; load it with POST "
                                  f"/v2/repository/models/{first}/load")

    # ------------------------------------------------------------------ changes
    async def load(self, name: str) -> Hosted:
        """Load (or reload) the service of `name`; raises PermissionDenied when model
        control is off, NotFound, LoadFailed."""
        return await self._change(LOAD, self._checked(name), followed=False)

    async def unload(self, name: str) -> Hosted:
        """Unload the service of `name` (nothing to do when it is not loaded)."""
        return await self._change(UNLOAD, self._checked(name), followed=False)

    async def follow(self, op: str, name: str) -> None:
        """Make the change another worker made (told by the supervisor); a failure is
        logged, this worker keeps what it had."""
        try:
            await self._change(op, self.service(name), followed=True)
        except TensorwireError as exc:
            log.error("could not follow the other workers' %s of %s: %s", op, name,
                      exc.message)

    def _checked(self, name: str) -> Hosted:
        if not self.enabled:
            raise control_off()
        if self._draining():
            raise ServiceUnavailable("the server is shutting down")
        return self.service(name)

    async def _change(self, op: str, service: Hosted, *, followed: bool) -> Hosted:
        async with self._locks[id(service)]:
            if op == LOAD:
                await self._load(service)
            elif service.wanted or service.ready:
                await self._unload(service)
            else:
                return service  # not loaded: nothing to unload
            for listener in self.listeners:
                await listener(op, service, followed)
        return service

    async def _load(self, service: Hosted) -> None:
        old = service.runtime if service.ready else None
        new = service.fresh_runtime()
        try:
            await new.start()  # binds the plans: new calls go to the new instance
        except InitFailure as exc:
            log.error("loading service %s failed", service.name, exc_info=exc.__cause__)
            await new.close()
            first = str(exc).splitlines()[0]
            raise LoadFailed(f"failed to load {service.name}: {first}") from None
        service.runtime = new
        service.wanted = True
        log.info("service %s %s", service.name, "reloaded" if old else "loaded")
        if old is not None:
            await self._retire(service, old)

    async def _unload(self, service: Hosted) -> None:
        service.wanted = False
        old = service.runtime
        refusal = self.unloaded(service)
        for plan in service.plans.values():
            plan.unbind(refusal)
        await self._retire(service, old)
        log.info("service %s unloaded", service.name)

    async def _retire(self, service: Hosted, runtime: ServiceRuntime) -> None:
        """Let the calls still running on a runtime the plans left finish, then close it."""
        if not await runtime.drained(self.grace):
            log.warning("%d call(s) of service %s still running after the %g s grace "
                        "period; closing it", runtime.calls, service.name, self.grace)
        await runtime.close()
