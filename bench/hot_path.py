"""The HTTP handler alone, in process: µs per request, tensorwire vs the bare handler.

    .venv/bin/python bench/hot_path.py [--requests 20000] [--rounds 5] [--profile]

Load tests on a shared 2-core machine swing by ±10 % from run to run, too much to see a
2 µs trim. This drives each handler directly with pre-built aiohttp requests on one
event loop (no sockets, no HTTP parsing: those cost both servers the same), so what it
measures is exactly what tensorwire adds: admission, decode, dispatch, time limit,
encode, response, metrics. `--profile` prints a pyinstrument profile of the tensorwire
handler. Writes bench/results/hot_path.json.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import streams
from aiohttp.test_utils import make_mocked_request

from bench.support.common import machine_info, table, write_results
from bench.support.model import BODY

_HEADERS = {"Content-Type": "application/json", "Content-Length": str(len(BODY)),
            "Host": "127.0.0.1"}


class _Protocol:
    """The body stream's side of a connection, doing nothing, as a real one does for a
    body that arrived whole. A `unittest.mock.Mock` here records every call: its call
    list grows by 20,000 entries a run and the garbage collector walks them, which cost
    the handler in the larger process (tensorwire's) up to ~10 µs a request that no
    real server pays."""

    _reading_paused = False
    connected = True

    def resume_reading(self, resume_parser: bool = True) -> None:
        pass

    def pause_reading(self) -> None:
        pass


def requests(n: int) -> list[Any]:
    """`n` POST /predict requests, each with its own body stream, built before timing."""
    loop = asyncio.get_running_loop()
    protocol = _Protocol()
    template = make_mocked_request("POST", "/predict", headers=_HEADERS, loop=loop)
    out = []
    for _ in range(n):  # clone() is ~60x cheaper than a new mocked request
        payload = streams.StreamReader(protocol, 2**16, loop=loop)
        payload.feed_data(BODY)
        payload.feed_eof()
        request = template.clone()
        request._payload = payload  # each request reads its own body
        out.append(request)
    return out


async def tensorwire_handler(settings_overrides: dict[str, Any]) -> Any:
    """The handler `POST /predict` is routed to: the one HTTP envelope's, for the API's
    request plan."""
    import tensorwire
    from bench.support.services import Bench
    from tensorwire.http.native import NativeSteps
    from tensorwire.http.request_envelope import HttpEnvelope
    from tensorwire.runtime.service import ServiceRuntime
    from tensorwire.settings import Settings

    spec = tensorwire.get_service_spec(Bench)
    settings = Settings(**settings_overrides)
    runtime = ServiceRuntime(spec, settings)
    await runtime.start()
    envelope = HttpEnvelope(runtime)
    return envelope.handler(NativeSteps(spec.apis["predict"], runtime, settings)
                            .route(envelope))


async def bare_handler(_: dict[str, Any]) -> Any:
    from bench.support.baselines.bare_http import predict

    return predict


async def time_handler(handler: Any, n: int) -> float:
    """µs per request of `handler` over `n` fresh requests, every one checked to answer
    200: a handler that fails fast would look cheap, so any failed request stops the
    run with their count (the check costs every handler the same few ns)."""
    batch = requests(n)
    gc.collect()
    failed, first = 0, None
    start = time.perf_counter()
    for request in batch:
        resp = await handler(request)
        if resp.status != 200:
            failed += 1
            first = first or resp
    elapsed = time.perf_counter() - start
    if first is not None:
        raise RuntimeError(f"{failed} of {n} requests failed; the first answered "
                           f"{first.status}: {first.body!r}")
    return elapsed / n * 1e6


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    variants = {"tensorwire": (tensorwire_handler, {}),
                "bare": (bare_handler, {})}
    if args.variants:
        variants.update({
            "tensorwire, no metrics": (tensorwire_handler, {"metrics": False}),
            "tensorwire, no time limit": (tensorwire_handler, {"request_timeout": 0}),
        })
    handlers = {name: await make(over) for name, (make, over) in variants.items()}
    for handler in handlers.values():  # warm-up: caches, pydantic, first metrics labels
        await time_handler(handler, 2000)
    runs: dict[str, list[float]] = {name: [] for name in handlers}
    for _ in range(args.rounds):  # alternate, so drift hits every variant alike
        for name, handler in handlers.items():
            runs[name].append(await time_handler(handler, args.requests))
    if args.profile:
        from pyinstrument import Profiler

        batch = requests(args.requests)
        handler = handlers["tensorwire"]
        with Profiler(interval=0.0001) as profiler:
            for request in batch:
                await handler(request)
        profiler.print(show_all=False)
    bare = statistics.median(runs["bare"])
    rows = {name: {"us_per_req": statistics.median(v), "runs": v,
                   "added_us": statistics.median(v) - bare}
            for name, v in runs.items()}
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=20000, help="requests per timed run")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    p.add_argument("--variants", action="store_true",
                   help="also time tensorwire with metrics off and with no time limit")
    p.add_argument("--profile", action="store_true", help="pyinstrument profile after")
    args = p.parse_args()
    rows = asyncio.run(main_async(args))
    print("HTTP handler in process (no sockets): µs per request, median of "
          f"{args.rounds} alternating runs of {args.requests}")
    print(table(["handler", "µs/req", "added vs bare µs"],
                [[name, f"{r['us_per_req']:.1f}", f"{r['added_us']:+.1f}"]
                 for name, r in rows.items()]))
    path = write_results("hot_path", {"name": "hot_path", "machine": machine_info(),
                                      "config": vars(args), "summary": rows})
    print(f"results: {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")


if __name__ == "__main__":
    main()
