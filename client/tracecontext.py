"""Carrying the caller's OpenTelemetry context to the server (W3C `traceparent`).

When the application traces with OpenTelemetry, every call made inside one of its spans
carries that span's context as HTTP headers or gRPC metadata (whatever propagators
`OTEL_PROPAGATORS` configures: W3C trace context and baggage by default), so the
server's spans join the caller's trace. Without opentelemetry installed this is one
`None` check per call: the package is looked for once, on the first call, never at
import.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

_inject: Callable[[MutableMapping[str, str]], None] | None = None
_looked = False


def _injector() -> Callable[[MutableMapping[str, str]], None] | None:
    global _inject, _looked
    if not _looked:
        _looked = True
        try:  # the optional `otel` extra (or the application's own opentelemetry-api)
            from opentelemetry import propagate
        except ImportError:
            _inject = None
        else:
            _inject = propagate.inject
    return _inject


def inject(headers: MutableMapping[str, str]) -> None:
    """Add the current trace context to `headers` (nothing outside a span)."""
    inject_ = _injector()
    if inject_ is not None:
        inject_(headers)


def with_context(metadata: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """gRPC metadata plus the current trace context's entries, if any."""
    inject_ = _injector()
    if inject_ is None:
        return metadata
    carrier: dict[str, Any] = {}
    inject_(carrier)
    if not carrier:
        return metadata
    return (*metadata, *((k.lower(), str(v)) for k, v in carrier.items()))
