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
