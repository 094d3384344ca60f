"""One API call through SyncClient or AsyncClient, for the client tables."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import tensorwire


def call_client(url: str, kind: str, api: str, args: tuple, kwargs: dict,
                norm: Callable[[Any], Any], **options: Any) -> Any:
    """`client.<api>(*args, **kwargs)` on a fresh "sync" or "async" client, normalised."""
    if kind == "sync":
        with tensorwire.SyncClient(url, **options) as client:
            return norm(getattr(client, api)(*args, **kwargs))

    async def main() -> Any:
        async with tensorwire.AsyncClient(url, **options) as client:
            return norm(await getattr(client, api)(*args, **kwargs))

    return asyncio.run(main())


def typed(value: Any) -> Any:
    """`value` with the type of every leaf beside it, so that a comparison tells 64 from
    64.0 and True from 1 (plain `==` does not: `{"w": 64} == {"w": 64.0}`)."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(typed(v) for v in value)
    return (type(value).__name__, value)
