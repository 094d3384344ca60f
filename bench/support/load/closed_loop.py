"""The closed loop every Python load client here runs, and the JSON line it prints.

`concurrency` coroutines call back to back (as wrk does) for `warmup` seconds, then
`WARM` is printed and the measured `duration` begins. A call is `call(stats)`: it appends
its latency to `stats["lat"]` when it succeeded (a stream also its time to first chunk
to `stats["ttfc"]` and its chunks to `stats["tokens"]`) and records a failure it sees in
the answer with `stats["failures"]`; an exception it raises is a failed call too, counted
by kind, and never stops the load. Requests/s and latencies count successful calls
only; failed calls (warm-up included) stand beside them.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.support.common import Failures, percentile

Call = Callable[[dict[str, Any]], Awaitable[None]]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _fresh() -> dict[str, Any]:
    return {"lat": [], "ttfc": [], "failures": Failures(), "tokens": 0}


async def measure(call: Call, concurrency: int, warmup: float, duration: float,
                  stream: bool = False) -> dict[str, Any]:
    """Warm up, print WARM, measure; the summary the bench scripts read."""
    async def loop(deadline: float, stats: dict[str, Any]) -> None:
        while time.perf_counter() < deadline:
            try:
                await call(stats)
            except Exception as exc:  # every failure kind counts, none stops the load
                stats["failures"].exception(exc)

    warm = _fresh()
    deadline = time.perf_counter() + warmup
    await asyncio.gather(*(loop(deadline, warm) for _ in range(concurrency)))
    print("WARM", flush=True)
    stats = _fresh()
    cpu0 = _cpu()
    start = time.perf_counter()
    deadline = start + duration
    await asyncio.gather(*(loop(deadline, stats) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    cpu = _cpu() - cpu0
    lat = sorted(stats["lat"])
    out = {
        "requests": len(lat),
        **stats["failures"].report(warm["failures"]),
        "elapsed_s": elapsed,
        "rps": len(lat) / elapsed,
        "p50_ms": percentile(lat, 50) * 1e3,
        "p90_ms": percentile(lat, 90) * 1e3,
        "p99_ms": percentile(lat, 99) * 1e3,
        "max_ms": (lat[-1] if lat else float("nan")) * 1e3,
        "client_cpu": cpu / elapsed,
        "samples": len(lat),
    }
    if stream:
        ttfc = sorted(stats["ttfc"])
        out.update(tokens=stats["tokens"], tokens_per_s=stats["tokens"] / elapsed,
                   ttfc_p50_ms=percentile(ttfc, 50) * 1e3,
                   ttfc_p90_ms=percentile(ttfc, 90) * 1e3,
                   ttfc_p99_ms=percentile(ttfc, 99) * 1e3,
                   # a server may start some streams at once and keep others waiting
                   # long (the median then says little): the mean is the waiting total
                   ttfc_mean_ms=sum(ttfc) / len(ttfc) * 1e3 if ttfc else float("nan"))
    return out
