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
from .contract.descriptor import ServiceSpec
from .contract.iodescriptor import IODescriptor
from .contract.sdk import api, get_service_spec, service
from .version import __version__ as __version__

if TYPE_CHECKING:  # pragma: no cover
    from .client import AsyncClient, SyncClient

_LAZY = {"SyncClient": "tensorwire.client", "AsyncClient": "tensorwire.client"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tensorwire' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "AsyncClient",
    "Context",
    "IODescriptor",
    "ServiceSpec",
    "SyncClient",
    "api",
    "errors",
    "get_service_spec",
    "service",
    "validators",
]
