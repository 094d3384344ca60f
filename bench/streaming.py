"""Streaming: tokens/s and time to first chunk, tensorwire vs the bare servers, both protocols.

    .venv/bin/python bench/streaming.py            # full run (~4 min)
    .venv/bin/python bench/streaming.py --quick    # one round, short runs
    .venv/bin/python bench/streaming.py --protocols http --variants async

A generator API (`tokens`, `n` chunks of one short string) streams as server-sent events
over HTTP and as a server stream over gRPC. Baselines: a bare aiohttp `StreamResponse`
writing the same SSE frames, and a bare grpc.aio servicer yielding the same messages
(`bench/baselines`). Load: the aiohttp and grpc.aio load clients in `--stream` mode on
the other core, `concurrency` streams in flight at once; each stream is timed to its
first event (TTFC) and to its end; a stream that fails, or ends with another number of
chunks than it was asked for, is a failed call, counted and printed beside the chunks/s
(which count whole streams only). Servers alternate A B A B per round, as every bench
here. Writes bench/results/streaming.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.grpc_unary import grpc_servers, measure_grpc
from bench.http_json import compare, finish, parse_args, servers
from bench.support.baselines.stubs import compile_stubs, load_stubs
from bench.support.common import (
    PY,
    ROOT,
    Pinning,
    Proc,
    core_times,
    failed_calls,
    run_load,
    table,
    wait_quiet,
    write_results,
)

METRICS = ("tokens_per_s", "ttfc_p50_ms", "ttfc_mean_ms", "ttfc_p99_ms", "rps", "p50_ms", "p99_ms",
           "server_us_per_req", "server_cpu", "foreign_cpu")
HTTP_VARIANTS = {"async": "/tokens", "def": "/tokens_sync"}
GRPC_VARIANTS = {"async": "/bench.Bench/Tokens", "def": "/bench.Bench/TokensSync"}


def measure_sse(pin: Pinning, url: str, body: bytes, concurrency: int, duration: float,
                warmup: float, proc: Proc, max_wait: float, chunks: int) -> dict[str, Any]:
    """One streaming load run over HTTP (the aiohttp client counts SSE events)."""
    cpu: dict[str, Any] = {}
    waited = wait_quiet(pin.cores(), max_wait=max_wait)

    def mark() -> None:
        cpu["start"] = proc.cpu_seconds()
        cpu["cores"] = core_times()

    result = run_load([*pin.prefix("load"), PY, "-m", "bench.support.load.http_client",
                       "--url", url,
                       "--body", body.decode(), "--concurrency", str(concurrency),
                       "--duration", str(duration), "--warmup", str(warmup), "--stream",
                       "--expect-chunks", str(chunks)], on_warm=mark)
    return finish(result, proc, pin, cpu, waited)


def print_streaming(payloads: list[dict[str, Any]]) -> None:
    nan = float("nan")  # results from before the mean was measured
    rows = []
    for payload in payloads:
        for s in payload["summary"]:
            tw, bare, ratio = s["tensorwire"], s["bare"], s["ratio"]
            rows.append([payload["protocol"], s["variant"], s["concurrency"],
                         tw["tokens_per_s"], failed_calls(tw), bare["tokens_per_s"],
                         failed_calls(bare), ratio["tokens_per_s"],
                         tw["ttfc_p50_ms"], bare["ttfc_p50_ms"], ratio["ttfc_p50_ms"],
                         tw.get("ttfc_mean_ms", nan), bare.get("ttfc_mean_ms", nan),
                         tw["ttfc_p99_ms"], bare["ttfc_p99_ms"]])
    print()
    print(table(["proto", "api", "conc", "tw tok/s", "tw failed", "bare tok/s", "bare failed",
                 "tok/s x", "tw ttfc50", "bare ttfc50", "ttfc50 x", "tw ttfc mean",
                 "bare ttfc mean", "tw ttfc99", "bare ttfc99"], rows))
    print("(x: median over rounds of tensorwire/bare; ttfc: time to first chunk, ms; a "
          "server that starts some streams at once and keeps others waiting shows a low "
          "median and a high mean; failed: streams that failed or came back short, all "
          "rounds, warm-up included)")


def main(argv: list[str] | None = None) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--protocols", default="http,grpc",
                     type=lambda s: [x for x in s.split(",") if x],
                     help="which protocols to stream over (http, grpc)")
    known, rest = pre.parse_known_args(argv)
    args = parse_args(rest, with_load=False)
    tokens = 64
    pin = Pinning.detect()
    stub_dir = compile_stubs(tempfile.mkdtemp(prefix="tensorwire-bench-stubs-"))
    pb, _ = load_stubs(stub_dir)
    grpc_request = pb.TokensRequest(n=tokens).SerializeToString()
    http_body = b'{"n":%d}' % tokens
    payloads = []

    def run_http(proc: Proc, url: str, path: str, c: int) -> dict[str, Any]:
        return measure_sse(pin, url + path, http_body, c, args.duration, args.warmup, proc,
                           args.max_wait, tokens)

    def run_grpc(proc: Proc, target: str, method: str, c: int) -> dict[str, Any]:
        return measure_grpc(pin, target, method, grpc_request, c, args.duration,
                            args.warmup, proc, args.max_wait, stream=True,
                            expect_chunks=tokens)

    for protocol, procs, variants, run_case, load in (
        ("http", servers(pin, "http"), HTTP_VARIANTS, run_http,
         "bench.support.load.http_client --stream: aiohttp, N streams, own process"),
        ("grpc", grpc_servers(pin, stub_dir), GRPC_VARIANTS, run_grpc,
         "bench.support.load.grpc_client --stream: grpc.aio, 1 channel, N streams, own process"),
    ):
        if protocol not in known.protocols:
            continue
        chosen = {v: variants[v] for v in args.variants}
        payload = compare(f"Streaming over {protocol}: {tokens} chunks per stream, "
                          "tensorwire vs bare", "streaming", procs, chosen, run_case, args,
                          pin, load, metrics=METRICS)
        payload["protocol"] = protocol
        payload["tokens_per_stream"] = tokens
        payloads.append(payload)
    print_streaming(payloads)
    # a run over one protocol does not replace the full run's figures
    name = "streaming" if len(payloads) == 2 else "streaming_" + payloads[0]["protocol"]
    path = write_results(name, {"name": name, "protocols": payloads})
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
