"""`@tensorwire.service` and `@tensorwire.api`: the user-facing SDK (BentoML-shaped).

`api` only marks a method; `service` reads every marked method into an `APISpec` when the
class is decorated (so contract errors surface at import) and attaches the resulting
`ServiceSpec` to the class, which stays a plain class the user can instantiate and test.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from ..naming import snake
from .dependency import dependencies_of, dependency
from .descriptor import APISpec, ServiceSpec
from .options import read_service_options
from .signature import APIConfig, ContractError, read_api

T = TypeVar("T", bound=type)
F = TypeVar("F", bound=Callable[..., Any])

_API_ATTR = "__tensorwire_api__"
_SERVICE_ATTR = "__tensorwire_service__"


@overload
def service(cls: T, /) -> T: ...
@overload
def service(
    *, name: str | None = None, proto_package: str | None = None,
    go_package: str | None = None, java_package: str | None = None,
    csharp_namespace: str | None = None, **config: Any
) -> Callable[[T], T]: ...


def service(
    cls: T | None = None,
    /,
    *,
    name: str | None = None,
    proto_package: str | None = None,
    go_package: str | None = None,
    java_package: str | None = None,
    csharp_namespace: str | None = None,
    **config: Any,
) -> T | Callable[[T], T]:
    """Declare a service class; bare (`@service`) or with arguments (`@service(name=...)`).

    `go_package`, `java_package` and `csharp_namespace` override the file options of the
    generated .proto, which are otherwise derived from `proto_package`.
    """
    file_options = {k: v for k, v in (("go_package", go_package),
                                      ("java_package", java_package),
                                      ("csharp_namespace", csharp_namespace)) if v is not None}

    def decorate(klass: T) -> T:
        if not isinstance(klass, type):
            raise ContractError(f"@tensorwire.service decorates a class, not {klass!r}")
        svc_name = name or klass.__name__
        if not re.fullmatch(r"[A-Za-z][0-9A-Za-z_\-]*", svc_name):
            raise ContractError(f"{klass.__qualname__}: service name {svc_name!r} must start "
                                "with a letter and hold only letters, digits, '_' and '-'")
        apis: dict[str, APISpec] = {}
        routes: dict[str, str] = {}
        for attr, member in _members_in_order(klass):
            api_config = getattr(member, _API_ATTR, None)
            if api_config is None:
                continue
            spec = read_api(klass, member, api_config)
            if spec.name in apis:
                raise ContractError(f"{klass.__qualname__}.{attr}(): API name {spec.name!r} is "
                                "already used by another method")
            if spec.route in routes:
                raise ContractError(f"{klass.__qualname__}.{attr}(): route {spec.route!r} is "
                                f"already used by {routes[spec.route]}()")
            apis[spec.name] = spec
            routes[spec.route] = attr
        package = proto_package or snake(svc_name)
        if not re.fullmatch(r"[a-z_][0-9a-z_]*(\.[a-z_][0-9a-z_]*)*", package):
            raise ContractError(f"{klass.__qualname__}: proto_package {package!r} is not a valid "
                            "protobuf package name (lowercase dotted identifiers)")
        # BentoML's options: a value of the wrong type fails here, like the contract.
        read_service_options(config, klass.__qualname__)
        for option, value in file_options.items():
            if not isinstance(value, str) or not re.fullmatch(r"[^\s\"\\]+", value):
                raise TypeError(f"{klass.__qualname__}: {option} must be a non-empty string "
                                f"without spaces, quotes or backslashes, got {value!r}")
        doc = klass.__doc__ or config.get("description")
        dependencies = dependencies_of(klass)
        if dependencies:  # every API may call them: its requests carry a call frame
            apis = {name: dataclasses.replace(api, composed=True)
                    for name, api in apis.items()}
        spec = ServiceSpec(name=svc_name, cls=klass, apis=apis, doc=doc,
                           proto_package=package, config=dict(config),
                           file_options=file_options, dependencies=dependencies)
        setattr(klass, _SERVICE_ATTR, spec)
        return klass

    if cls is not None:
        return decorate(cls)
    return decorate


def _members_in_order(klass: type) -> list[tuple[str, Any]]:
    """Methods in declaration order, base classes first (APIs may be inherited)."""
    seen: dict[str, Any] = {}
    for base in reversed(klass.__mro__):
        for attr, member in vars(base).items():
            seen[attr] = member
    return list(seen.items())


@overload
def api(func: F, /) -> F: ...
@overload
def api(
    *,
    route: str | None = None,
    name: str | None = None,
    input_spec: type[BaseModel] | None = None,
    output_spec: type[BaseModel] | None = None,
    batchable: bool = False,
    batch_dim: int | tuple[int, int] = 0,
    max_batch_size: int = 64,
    max_latency_ms: float = 10.0,
) -> Callable[[F], F]: ...


def api(
    func: F | None = None,
    /,
    *,
    route: str | None = None,
    name: str | None = None,
    input_spec: type[BaseModel] | None = None,
    output_spec: type[BaseModel] | None = None,
    batchable: bool = False,
    batch_dim: int | tuple[int, int] = 0,
    max_batch_size: int = 64,
    max_latency_ms: float = 10.0,
) -> F | Callable[[F], F]:
    """Mark a method as an API; bare (`@api`) or with arguments (`@api(route="/x")`)."""
    if max_batch_size < 1:
        raise ValueError("max_batch_size must be >= 1")
    if max_latency_ms <= 0:
        raise ValueError("max_latency_ms must be > 0")
    config = APIConfig(route=route, name=name, input_spec=input_spec, output_spec=output_spec,
                       batchable=batchable, batch_dim=batch_dim,
                       max_batch_size=max_batch_size, max_latency_ms=max_latency_ms)

    def mark(f: F) -> F:
        if not callable(f):
            raise ContractError(f"@tensorwire.api decorates a method, not {f!r}")
        setattr(f, _API_ATTR, config)
        return f

    if func is not None:
        return mark(func)
    return mark


def depends(on: type | None = None, *, url: str | None = None,
            deployment: str | None = None, cluster: str | None = None) -> Any:
    """Declare a dependency on another service, as a class attribute (BentoML's form).

    `depends(Model)`: in-process when served together (the default), or wherever
    `--dependency Model=grpc://host:port` places it; `depends(url="grpc://host:port")`:
    a deployment elsewhere, untyped; `depends(on=Model, url=...)`: elsewhere, typed by
    `Model`. Methods call it like the service: `self.model.classify(x=...)` from a
    `def` API, `await self.model.to_async.classify(x=...)` from an `async def` one.
    See `tensorwire.contract.dependency` and docs/guides/composing.md.
    """
    return dependency(on, url=url, deployment=deployment, cluster=cluster,
                      spec_of=get_service_spec)


def get_service_spec(obj: Any) -> ServiceSpec:
    """The ServiceSpec of a decorated class (or of an instance of one)."""
    klass = obj if isinstance(obj, type) else type(obj)
    spec = getattr(klass, _SERVICE_ATTR, None)
    if not isinstance(spec, ServiceSpec) or spec.cls is not klass:
        raise TypeError(f"{getattr(klass, '__qualname__', klass)!r} is not a "
                        "@tensorwire.service class")
    return spec
