"""How a `def` API's call reaches its thread and comes back: CPU per call, side by side.

    .venv/bin/python bench/def_path.py [--calls 20000] [--concurrency 1 16 64] [--rounds 5]

Every variant runs the same trivial method (it returns its argument), `--calls` times,
from `--concurrency` coroutines at once, on one event loop, and the process CPU time
(user + system, all threads) is divided by the number of calls. Variants:

- `async def`: the coroutine itself, the floor a `def` API is held against;
- `run_in_executor`: `loop.run_in_executor(ThreadPoolExecutor)`, asyncio's own way;
- `submit+wrap_future`: `executor.submit` + `asyncio.wrap_future` (what the runtime did);
- `handoff`: `tensorwire.runtime.handoff.Handoff`, one wake-up per burst of results.

Rounds alternate the variants; the median per variant is reported, and the ratio to
`async def` is the figure issue 16 asks about (<= 1.15x for the `def` path). CPU time is
steadier than wall time on a shared machine; it still moves with cache and frequency, so
compare variants within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import machine_info, table, write_results
from tensorwire.runtime.handoff import Handoff


def method(x: int) -> int:
    return x


async def amethod(x: int) -> int:
    return x


async def drive(call: Any, calls: int, concurrency: int) -> float:
    """CPU seconds per call of `calls` calls made by `concurrency` coroutines."""
    per = calls // concurrency

    async def worker(i: int) -> None:
        for j in range(per):
            await call(j)

    start = time.process_time()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return (time.process_time() - start) / (per * concurrency)


def variants(threads: int) -> dict[str, Any]:
    executor = ThreadPoolExecutor(max_workers=threads)
    handoff = Handoff(threads)

    async def via_async(x: int) -> int:
        return await amethod(x)

    async def via_run_in_executor(x: int) -> int:
        return await asyncio.get_running_loop().run_in_executor(executor, method, x)

    async def via_wrap_future(x: int) -> int:
        return await asyncio.wrap_future(executor.submit(functools.partial(method, x)))

    async def via_handoff(x: int) -> int:
        return await handoff.run(method, x).future

    return {"async def": via_async, "run_in_executor": via_run_in_executor,
            "submit+wrap_future": via_wrap_future, "handoff": via_handoff}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    calls = variants(args.threads)
    for concurrency in args.concurrency:
        runs: dict[str, list[float]] = {name: [] for name in calls}
        for call in calls.values():  # warm-up: threads started, code paths hot
            await drive(call, 2000, concurrency)
        for _ in range(args.rounds):
            for name, call in calls.items():
                runs[name].append(await drive(call, args.calls, concurrency))
        floor = statistics.median(runs["async def"])
        out[str(concurrency)] = {name: {"us_per_call": statistics.median(v) * 1e6,
                                        "vs_async": statistics.median(v) / floor,
                                        "runs_us": [r * 1e6 for r in v]}
                                 for name, v in runs.items()}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=4)
    args = p.parse_args()
    results = asyncio.run(main_async(args))
    rows = []
    for concurrency, by_name in results.items():
        for name, r in by_name.items():
            rows.append([concurrency, name, f"{r['us_per_call']:.1f}", f"{r['vs_async']:.2f}x"])
    print(f"CPU µs per call (process time, all threads), median of {args.rounds} rounds")
    print(table(["concurrency", "variant", "CPU µs/call", "vs async def"], rows))
    path = write_results("def_path", {"name": "def_path", "machine": machine_info(),
                                      "config": vars(args), "results": results})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
