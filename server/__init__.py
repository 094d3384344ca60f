"""tensorwire: one typed Python class, served over gRPC and HTTP.

    import tensorwire

    @tensorwire.service
    class Echo:
        @tensorwire.api
        def echo(self, text: str) -> str:
            return text

`import tensorwire` stays light: frameworks (torch, tensorflow, pandas, PIL) and the
server/client stacks load only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import errors, validators
from .context import Context
from .contract import dependency as _dependency
from .contract.dependency import Dependency
from .contract.descriptor import ServiceSpec
from .contract.iodescriptor import IODescriptor
from .contract.sdk import api, depends, get_service_spec, service
from .version import __version__ as __version__

if TYPE_CHECKING:  # pragma: no cover
    from .client import AsyncClient, SyncClient

_LAZY = {"SyncClient": "tensorwire.client", "AsyncClient": "tensorwire.client"}


def _resolve_unplaced(dependency: Dependency, instance: Any) -> Any:
    """An instance made by hand (no server placed its dependencies): resolved on first
    use by `tensorwire.compose.standalone`, loaded only then (it starts services)."""
    import importlib

    standalone = importlib.import_module("tensorwire.compose.standalone")
    return standalone.resolve(dependency, instance)


_dependency.resolve_unplaced = _resolve_unplaced


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tensorwire' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncClient",
    "Context",
    "Dependency",
    "IODescriptor",
    "ServiceSpec",
    "SyncClient",
    "api",
    "depends",
    "errors",
    "get_service_spec",
    "service",
    "validators",
]
