"""Where a server's dependencies run, decided once at start-up, and the handles that
its service instances get.

`tensorwire serve pipeline:Pipeline` serves `Pipeline`; each `tensorwire.depends(X)`
of it is placed:

- at a URL, when the `dependencies` setting names it (`--dependency X=grpc://x:50051`,
  `TENSORWIRE_DEPENDENCIES`, TOML `dependencies = ["X=grpc://x:50051"]`), or else when
  the code gave one (`depends(url=...)`, `depends(on=X, url=...)`): its calls go over
  the client (`RemoteBackend`), one client per URL shared by every service that depends
  on it;
- otherwise in this process: `X` is served by the same server (its own routes, both
  protocols, its own runtime), started before the services that depend on it, and its
  calls go through its request plans (`LocalBackend`). Its own dependencies are placed
  the same way, so a chain or a diamond of in-process services starts in dependency
  order, each once.

A cycle of in-process dependencies cannot start (each would need the other first) and
is refused with the cycle named; a placement setting that names no dependency is
refused too (a typo would otherwise silently serve in-process what was meant to run
elsewhere).

The names in placement settings are the dependencies' service names (`@service(name=)`,
else the class name); for a URL-only dependency, its attribute name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ..contract import dependency
from ..contract.dependency import Dependency
from ..contract.descriptor import ServiceSpec
from ..runtime.plan import RequestPlan
from .handles import ServiceHandle
from .local import LocalBackend
from .remote import RemoteBackend


class PlacementError(ValueError):
    """The dependencies cannot be placed as asked (the message says why)."""


def parse_placements(entries: Iterable[str]) -> dict[str, str]:
    """`["Model=grpc://model:50051", ...]` (the `dependencies` setting) as a mapping."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, url = entry.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise PlacementError(f"dependency placement {entry!r}: expected NAME=URL, "
                                 "e.g. Model=grpc://model:50051")
        if name in out and out[name] != url:
            raise PlacementError(f"dependency {name} is placed twice: at {out[name]} and "
                                 f"at {url}")
        out[name] = url
    return out


class Composition:
    """The placement of every dependency of a server's services (see the module
    docstring), and the handles each service's instance gets.

    `services`: the services the server was asked to serve. `order` is every service
    this process runs, dependencies before the services that depend on them (those
    added for being depended on: `added`).
    """

    def __init__(self, services: Sequence[ServiceSpec],
                 placements: Mapping[str, str] | None = None, *,
                 token: str | None = None, channels: int | None = None) -> None:
        self.placements = dict(placements or {})
        self._token = token
        self._channels = channels
        self._remote: dict[tuple[str, str], RemoteBackend] = {}
        #: service class -> {attribute: ("local", spec) | ("remote", backend)}
        self._edges: dict[type, dict[str, tuple[str, Any]]] = {}
        self._placed: list[tuple[type, Mapping[str, Any]]] = []
        used: set[str] = set()
        by_class: dict[type, ServiceSpec] = {s.cls: s for s in services}
        order: list[ServiceSpec] = []
        state: dict[type, str] = {}  # "visiting" / "done"

        def visit(spec: ServiceSpec, path: list[str]) -> None:
            seen = state.get(spec.cls)
            if seen == "done":
                return
            if seen == "visiting":
                cycle = " -> ".join([*path[path.index(spec.name):], spec.name])
                raise PlacementError(f"in-process dependencies form a cycle: {cycle}; "
                                     "place one of them elsewhere (--dependency "
                                     f"{spec.name}=grpc://host:port)")
            state[spec.cls] = "visiting"
            edges: dict[str, tuple[str, Any]] = {}
            for attribute, dep in spec.dependencies.items():
                url = self.placements.get(dep.name) or dep.url
                if dep.name in self.placements:
                    used.add(dep.name)
                if url is not None:
                    edges[attribute] = ("remote", self._backend(dep, url))
                    continue
                assert dep.spec is not None  # depends() needs a class or a URL
                target = by_class.setdefault(dep.spec.cls, dep.spec)
                visit(target, [*path, spec.name])
                edges[attribute] = ("local", target)
            self._edges[spec.cls] = edges
            state[spec.cls] = "done"
            order.append(spec)

        for spec in services:
            visit(spec, [])
        unknown = sorted(set(self.placements) - used)
        if unknown:
            known = sorted({d.name for s in order for d in s.dependencies.values()})
            raise PlacementError(f"--dependency {', '.join(unknown)}: no service served here "
                                 f"depends on {' or '.join(unknown)} (its dependencies: "
                                 f"{', '.join(known) or 'none'})")
        self.order = order
        asked = {s.cls for s in services}
        self.added = [s for s in order if s.cls not in asked]

    def _backend(self, dep: Dependency, url: str) -> RemoteBackend:
        key = (dep.name, url)
        backend = self._remote.get(key)
        if backend is None:
            try:
                backend = RemoteBackend(dep.name, url, dep.spec, token=self._token,
                                        channels=self._channels)
            except ValueError as exc:
                raise PlacementError(f"dependency {dep.name} at {url!r}: {exc}") from None
            self._remote[key] = backend
        return backend

    @property
    def remote(self) -> dict[str, str]:
        """Dependency name -> URL, of those placed elsewhere."""
        return {name: url for name, url in self._remote}

    def handles(self, spec: ServiceSpec,
                plans_of: Callable[[ServiceSpec], Mapping[str, RequestPlan]],
                loop: asyncio.AbstractEventLoop,
                keep: Callable[[Any], None] | None = None) -> dict[str, ServiceHandle]:
        """The handles of `spec`'s dependencies (`plans_of` gives an in-process
        dependency's request plans, which outlive its runtimes), calling on `loop`."""
        out: dict[str, ServiceHandle] = {}
        for attribute, (where, target) in self._edges.get(spec.cls, {}).items():
            if where == "remote":
                backend: Any = target
            else:
                backend = LocalBackend(target.name, plans_of(target), keep)
            out[attribute] = ServiceHandle(backend, loop)
        return out

    def place(self, spec: ServiceSpec, handles: Mapping[str, Any]) -> None:
        """Give `spec`'s instances made from now on their handles (see
        `contract.dependency`); `placing` does it for the one about to start."""
        if not handles:
            return
        dependency.placed.setdefault(spec.cls, []).append(handles)
        self._placed.append((spec.cls, handles))

    @staticmethod
    def placing(spec: ServiceSpec, handles: Mapping[str, Any]) -> Any:
        """Make `handles` those of `spec`'s instance made in this context (the server's
        start of it: `__init__` runs in the start's context); the token resets it."""
        return dependency.placing.set({**(dependency.placing.get() or {}), spec.cls: handles})

    @staticmethod
    def settle(instance: Any, handles: Mapping[str, Any]) -> None:
        """Every handle a plain attribute of the started `instance` (no descriptor on
        the request path)."""
        for attribute, handle in handles.items():
            instance.__dict__.setdefault(attribute, handle)

    async def close(self) -> None:
        """Close the clients of remote dependencies; unplace the classes."""
        for cls, handles in self._placed:
            served = dependency.placed.get(cls, [])
            served[:] = [h for h in served if h is not handles]
            if not served:
                dependency.placed.pop(cls, None)
        self._placed.clear()
        for backend in self._remote.values():
            await backend.close()
