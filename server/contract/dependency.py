"""`tensorwire.depends(Other)`: a service's typed handle to another service.

    @tensorwire.service
    class Pipeline:
        model = tensorwire.depends(Model)              # in-process unless placed elsewhere
        ranker = tensorwire.depends(url="grpc://ranker:50051")
        tagger = tensorwire.depends(on=Tagger, url="grpc://tagger:50051")  # typed, remote

        @tensorwire.api
        def predict(self, image: Image) -> Label:
            return self.model.classify(x=prepare(image))

A `Dependency` is pure description, as FastAPI's `Dependant` is: what the attribute
depends on (`on`, a service class) and where it was said to run (`url`). Placing it
(in-process, or over gRPC/HTTP when `--dependency NAME=URL` or `url=` says so) and
calling it is `tensorwire.compose`'s work; this module only holds the descriptor and
the table through which a server hands each instance its handles.

Handles are plain attributes of the instance once it is served: the server puts them
in the instance's `__dict__`, so `self.model` is an ordinary attribute read, not a
descriptor call, on every request. While a server instantiates the class (its
`__init__` may already call a dependency, to warm up), they are what it set in
`placing` around the start (the class is made in the context of its start, which the
thread that runs `__init__` gets); an instance made later (a service loaded again) finds
them in `placed`, when one server in the process serves that class. An instance made by
hand, outside any server (a unit test, a notebook), resolves its dependencies on first
access through the hook the package installs (`tensorwire.compose.standalone`), as
BentoML's do.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .descriptor import ServiceSpec

#: URL schemes a dependency may be placed at (`tensorwire.client`'s targets).
URL_SCHEMES = ("grpc", "grpcs", "dns", "http", "https")
_URL = re.compile(r"(grpcs?|dns|https?)://?\S*")

#: class -> {attribute: handle} of the instances being made now (see the module doc).
placing: contextvars.ContextVar[Mapping[type, Mapping[str, Any]] | None] = (
    contextvars.ContextVar("tensorwire_placing", default=None))
#: class -> the {attribute: handle} of each server in this process that serves it.
placed: dict[type, list[Mapping[str, Any]]] = {}

#: How an instance outside any server gets a handle (installed by `import tensorwire`).
resolve_unplaced: Callable[[Dependency, Any], Any] | None = None


@dataclass(eq=False)
class Dependency:
    """One `depends(...)` class attribute (see the module docstring)."""

    #: The service class depended on (None: only a URL is known, untyped).
    on: type | None = None
    #: Where it runs, when the code says so (a placement setting overrides it).
    url: str | None = None
    #: The attribute name, and the class that declares it (set by `__set_name__`).
    attribute: str = ""
    owner: type | None = None
    #: The depended-on service's contract (None for a URL-only dependency).
    spec: ServiceSpec | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        """What placement settings and messages call it: the service's name (`Model`
        in `--dependency Model=grpc://...`), else the attribute's."""
        return self.spec.name if self.spec is not None else self.attribute

    @property
    def where(self) -> str:
        """`Owner.attribute`, for messages."""
        owner = self.owner.__qualname__ if self.owner is not None else "?"
        return f"{owner}.{self.attribute}"

    def __set_name__(self, owner: type, name: str) -> None:
        self.owner = owner
        self.attribute = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        cls = type(instance)
        handles = (placing.get() or {}).get(cls)
        if handles is None:
            served = placed.get(cls, ())
            if len(served) > 1:
                raise RuntimeError(f"{self.where}: {len(served)} servers in this process "
                                   "serve this class; an instance made outside their start "
                                   "cannot tell whose dependencies it gets")
            handles = served[0] if served else None
        if handles is not None and self.attribute in handles:
            handle = handles[self.attribute]
        elif resolve_unplaced is not None:
            handle = resolve_unplaced(self, instance)
        else:  # `tensorwire` itself was never imported: nothing can place it
            raise RuntimeError(f"{self.where}: no server placed this dependency")
        instance.__dict__[self.attribute] = handle  # later reads: a plain attribute
        return handle


def dependency(on: Any = None, *, url: str | None = None, deployment: str | None = None,
               cluster: str | None = None, spec_of: Callable[[Any], ServiceSpec]
               ) -> Dependency:
    """A checked `Dependency` (the public `depends` is `tensorwire.contract.sdk`'s)."""
    if deployment is not None or cluster is not None:
        raise ValueError(
            "depends(deployment=..., cluster=...) names a BentoCloud deployment, which "
            "tensorwire has no registry of: give its address, depends(url='grpc://host:"
            "port'), or place it when serving (--dependency NAME=grpc://host:port)")
    spec = None
    if on is not None:
        try:
            spec = spec_of(on)
        except TypeError:
            raise TypeError("depends() expects a class decorated with "
                            f"@tensorwire.service, got {on!r}") from None
        if not isinstance(on, type):
            raise TypeError(f"depends() expects the service class, not an instance: {on!r}")
    if url is not None:
        if not isinstance(url, str) or not _URL.fullmatch(url.strip()):
            raise ValueError(f"depends(url={url!r}): expected a URL such as "
                             "grpc://host:50051, dns:///host:50051 or http://host:3000 "
                             f"(schemes: {', '.join(URL_SCHEMES)})")
        url = url.strip()
    if on is None and url is None:
        raise ValueError("depends() needs the service it depends on (depends(Model)) or "
                         "the URL where it runs (depends(url='grpc://host:50051')), or both")
    return Dependency(on=on, url=url, spec=spec)


def dependencies_of(klass: type) -> dict[str, Dependency]:
    """A service class's dependencies by attribute, base classes first."""
    out: dict[str, Dependency] = {}
    for base in reversed(klass.__mro__):
        for name, member in vars(base).items():
            if isinstance(member, Dependency):
                out[name] = member
            else:
                out.pop(name, None)  # overridden by a plain attribute
    return out
