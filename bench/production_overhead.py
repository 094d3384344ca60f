"""What the production layer adds per request, measured two ways (one run each).

1. Micro: `Admission.admit()` + `Ticket.finish()` (the per-request work shared by both
   transports) under the default settings, with metrics off, with the access log on,
   the runtime's per-request timeout wrapper, and one request's OpenTelemetry spans
   (server span + decode, model, encode; SDK batch processor, a no-op exporter), in a
   tight loop.
2. Macro: HTTP requests/s of one server process, side by side: a bare aiohttp handler
   returning the same JSON, tensorwire at its defaults (metrics on, 60 s timeout, tracing
   off), with the access log on as well (to /dev/null), with tracing on (every request
   sampled, OTEL_TRACES_EXPORTER=none: spans made and ended, not shipped), and with
   metrics and timeout off. Client: aiohttp, keep-alive, 32 concurrent, in this process;
   every answer other than 200 and every exception is a failed call, left out of the
   requests/s and printed beside them.

    .venv/bin/python bench/production_overhead.py [--seconds 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.support.common import Failures  # noqa: E402


def micro(n: int = 200_000) -> dict[str, float]:
    import logging

    from tensorwire.context import Headers, RequestInfo
    from tensorwire.runtime.admission import Admission
    from tensorwire.settings import Settings
    from tensorwire.telemetry import logs

    null = open(os.devnull, "w")  # noqa: SIM115 - lives for the benchmark
    out = {}
    for label, settings in (("defaults (metrics on, access log off)", Settings()),
                            ("metrics and access log off", Settings(metrics=False)),
                            ("metrics on, access log on (text, to /dev/null)",
                             Settings(access_log=True))):
        logs.configure("info", "text")
        logging.getLogger().handlers[0].setStream(null)
        adm = Admission(settings)
        adm.describe("http", "bench", "POST", "/bench")

        def request() -> RequestInfo:
            return RequestInfo("http", "bench", Headers(), "127.0.0.1")

        adm.admit("http", "bench", request()).finish(200, 10, 10)  # create the series
        t0 = time.perf_counter()
        for _ in range(n):
            adm.admit("http", "bench", request()).finish(200, 10, 10)
        out[label] = (time.perf_counter() - t0) / n * 1e6

    async def timeouts() -> float:
        # each iteration yields to the loop, as a request does (so cancelled timer
        # handles are cleaned up as they would be in a server)
        m = n // 4
        t0 = time.perf_counter()
        for _ in range(m):
            await asyncio.sleep(0)
        bare = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(m):
            async with asyncio.timeout(60):
                await asyncio.sleep(0)
        return (time.perf_counter() - t0 - bare) / m * 1e6

    out["asyncio.timeout wrapper (request_timeout > 0)"] = asyncio.run(timeouts())
    out.update(tracing_micro(n // 4))
    return out


def tracing_micro(n: int) -> dict[str, float]:
    """One request's spans as the transports make them, off (the `None` checks) and on."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    from tensorwire.context import Headers, RequestInfo
    from tensorwire.telemetry.tracing import Tracing

    class Discard(SpanExporter):
        def export(self, spans):  # type: ignore[no-untyped-def]
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    on = Tracing(provider.get_tracer("bench"), {("http", "bench"): ("POST", "/bench")})

    async def model() -> int:
        return 1

    async def request(tracing: Tracing | None) -> None:
        info = RequestInfo("http", "bench", Headers({"traceparent": "00-0af7651916cd43dd8448eb"
                                                    "211c80319c-b7ad6b7169203331-01"}),
                           "127.0.0.1")
        span = tracing.start(info) if tracing is not None else None
        if span is not None:
            span.decoded()
        work = model()
        if tracing is not None:
            work = tracing.model_call(work)
        await work
        if span is not None:
            span.encoding()
        if span is not None:
            span.finish(200)

    async def loop(tracing: Tracing | None) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            await request(tracing)
        return (time.perf_counter() - t0) / n * 1e6

    off, traced = asyncio.run(loop(None)), asyncio.run(loop(on))
    provider.shutdown()
    return {"tracing off (a request's None checks, model call included)": off,
            "tracing on (server + decode/model/encode spans, W3C parent; same loop)": traced}


BARE = textwrap.dedent("""
    import sys, orjson
    from aiohttp import web
    async def summarize(request):
        body = orjson.loads(await request.read())
        words = body["text"].split()
        return web.Response(body=orjson.dumps({"summary": " ".join(words[:8]),
                            "words": len(words)}), content_type="application/json")
    app = web.Application()
    app.router.add_post("/summarize", summarize)
    app.router.add_get("/readyz", lambda r: web.Response(text="ok"))
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None,
                print=None)
""")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], port: int) -> subprocess.Popen:
    import urllib.request

    env = {**os.environ, "OTEL_TRACES_EXPORTER": "none"}  # only read with --tracing
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    for _ in range(400):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1)
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{cmd} did not start")


async def load(port: int, seconds: float, concurrency: int = 32) -> tuple[float, Failures]:
    """Requests/s of the calls answered 200, and the failed calls (warm-up included)."""
    import aiohttp

    url = f"http://127.0.0.1:{port}/summarize"
    body = b'{"text": "tensorwire serves one typed contract over gRPC and HTTP"}'
    headers = {"Content-Type": "application/json"}
    done = 0
    failures = Failures()

    async def call(session: aiohttp.ClientSession) -> bool:
        try:
            async with session.post(url, data=body, headers=headers) as r:
                answer = await r.read()
        except Exception as exc:
            failures.exception(exc)
            return False
        if r.status != 200:
            failures.add(f"status {r.status}", answer[:200].decode(errors="replace"))
            return False
        return True

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            done += await call(session)

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        for _ in range(200):  # warm-up
            await call(session)
        t0 = time.perf_counter()
        stop = t0 + seconds
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return done / (time.perf_counter() - t0), failures


def macro(seconds: float, rounds: int) -> tuple[dict[str, list[float]], dict[str, Failures]]:
    tw = [sys.executable, "-m", "tensorwire", "serve", "examples.quickstart:Quickstart",
          "--no-grpc"]
    cases = {
        "bare aiohttp": lambda p: [sys.executable, "-c", BARE, str(p)],
        "tensorwire defaults (metrics on, 60 s timeout, no access log)": lambda p: [
            *tw, "--http-port", str(p)],
        "tensorwire defaults + access log": lambda p: [
            *tw, "--http-port", str(p), "--access-log"],
        "tensorwire defaults + tracing (all sampled, exporter none)": lambda p: [
            *tw, "--http-port", str(p), "--tracing"],
        "tensorwire, metrics and timeout off too": lambda p: [
            *tw, "--http-port", str(p), "--no-metrics", "--request-timeout", "0"],
    }
    out: dict[str, list[float]] = {label: [] for label in cases}
    failed = {label: Failures() for label in cases}
    for _ in range(rounds):  # interleaved, so drift in machine load hits every case
        for label, make in cases.items():
            port = free_port()
            proc = start(make(port), port)
            try:
                rps, failures = asyncio.run(load(port, seconds))
                out[label].append(rps)
                failed[label].merge(failures)
            finally:
                proc.terminate()
                proc.wait(30)
    return out, failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines = [f"# production overhead ({os.cpu_count()} CPUs, one run)", "",
             "## per request, in-process (microseconds)"]
    for label, us in micro().items():
        lines.append(f"- {label}: {us:.2f} us")
    lines += ["", f"## HTTP requests/s, 1 process, 32 concurrent, {args.seconds:g} s per "
              f"run, median of {args.rounds} interleaved runs"]
    runs, failed = macro(args.seconds, args.rounds)
    rps = {label: statistics.median(v) for label, v in runs.items()}
    base = rps["bare aiohttp"]
    for label, value in rps.items():
        raw = ", ".join(f"{v:,.0f}" for v in runs[label])
        f = failed[label]
        lines.append(f"- {label}: {value:,.0f} rps, {f.total} failed calls "
                     f"({value / base:.2f}x bare; runs {raw})"
                     + (f"; first failure: {f.first}" if f.first else ""))
    text = "\n".join(lines) + "\n"
    print(text)
    (ROOT / "bench" / "results" / "production_overhead.md").write_text(text)


if __name__ == "__main__":
    main()
