"""Per-call options and the retry policy (off unless asked for).

Retries are only safe for idempotent calls, so they are opt-in (`retries=N`) and only
for failures where the server cannot have run the method, or said it did not: a
connection that never opened (`ServerUnreachable`), and "not now" answers from the
server (`ServiceUnavailable` / `Overloaded`: HTTP 503, gRPC UNAVAILABLE). Each retry
waits `backoff * 2**attempt` seconds (at most `max_backoff`), with full jitter, or the
server's `Retry-After` when it gives a longer one.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..errors import Overloaded, ServerUnreachable, ServiceUnavailable, TensorwireError

T = TypeVar("T")

RETRYABLE: tuple[type[TensorwireError], ...] = (ServerUnreachable, ServiceUnavailable,
                                                Overloaded)


@dataclass(frozen=True)
class CallOptions:
    """What every call of a client (or of a `with_options` view) runs with."""

    #: Seconds a call may take in all (a stream: until its last chunk); None: no limit.
    timeout: float | None = None
    retries: int = 0
    backoff: float = 0.1
    max_backoff: float = 5.0
    #: Extra HTTP headers / gRPC metadata sent with every call.
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.timeout is not None and self.timeout <= 0:
            raise ValueError("timeout must be > 0 seconds (or None for no limit)")
        if self.retries < 0:
            raise ValueError("retries must be >= 0")
        if self.backoff < 0 or self.max_backoff < 0:
            raise ValueError("backoff must be >= 0")

    def merged(self, **changes: Any) -> CallOptions:
        headers = changes.pop("headers", None)
        out = replace(self, **{k: v for k, v in changes.items() if v is not _KEEP})
        if headers:
            out = replace(out, headers={**self.headers, **headers})
        return out

    def delay(self, attempt: int, error: TensorwireError) -> float:
        wait = random.uniform(0, min(self.max_backoff, self.backoff * 2 ** attempt))
        retry_after = _retry_after(error)
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_backoff))
        return wait


_KEEP: Any = object()


def _retry_after(error: TensorwireError) -> float | None:
    value = error.headers.get("Retry-After") or error.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


async def with_retries(options: CallOptions, attempt_call: Callable[[], Awaitable[T]]) -> T:
    """Run `attempt_call`, retrying retryable failures as `options` allow."""
    attempt = 0
    while True:
        try:
            return await attempt_call()
        except RETRYABLE as exc:
            if attempt >= options.retries:
                raise
            await asyncio.sleep(options.delay(attempt, exc))
            attempt += 1
