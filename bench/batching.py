"""Adaptive batching vs none: a 2 ms + 0.02 ms/item model under 64 concurrent clients.

    .venv/bin/python bench/batching.py [--seconds 5] [--rounds 3]

One tensorwire server (bench/support/batching_service.py: the same model behind a plain and a
`batchable=True` API) runs pinned to one core; the load generator (bench/support/batching_load.py)
runs in its own process on the other. For each protocol it measures the lone-request
latency of the batchable API (one client), then alternates unbatched / batched runs at
64 clients (A B A B ...) and reports medians and the throughput ratio. Target: >= 5x the
throughput with p99 <= 3x the lone-request latency; every target is missed when any call
of the protocol's runs (lone, unbatched or batched) failed, and failed calls are printed
beside requests/s. Results: bench/results/batching.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from bench.support.common import failed_calls, target_met, verdict  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(core: int | None) -> list[str]:
    return ["taskset", "-c", str(core)] if core is not None else []


def cores() -> tuple[int | None, int | None]:
    available = sorted(os.sched_getaffinity(0))
    if shutil.which("taskset") and len(available) >= 2:
        return available[0], available[1]
    return None, None


def load(core: int | None, *args: str) -> dict:
    out = subprocess.run([*pin(core), PY, str(ROOT / "bench" / "batching_load.py"), *args],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def scrape(http_port: int) -> dict[str, float]:
    """The batch size and queue wait sums/counts of predict_batched, from /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if 'api="predict_batched"' in line and line.startswith(
                ("tensorwire_batch_size_", "tensorwire_batch_queue_wait_seconds_")):
            name = line.split("{", 1)[0]
            if name.endswith(("_sum", "_count")):
                out[name] = float(line.rsplit(" ", 1)[1])
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def observed(before: dict[str, float], after: dict[str, float], cpu: float,
             requests: int) -> dict[str, float]:
    """What the server did during one batched run: CPU per request, batch sizes, waits."""
    def delta(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    batches = delta("tensorwire_batch_size_count")
    waits = delta("tensorwire_batch_queue_wait_seconds_count")
    return {"server_us_per_req": cpu / max(1, requests) * 1e6,
            "mean_batch": delta("tensorwire_batch_size_sum") / batches if batches else 0.0,
            "mean_queue_wait_ms": (delta("tensorwire_batch_queue_wait_seconds_sum") / waits
                                   * 1e3) if waits else 0.0}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=64)
    a = p.parse_args()
    server_core, load_core = cores()
    http_port, grpc_port = free_port(), free_port()
    server = subprocess.Popen(
        [*pin(server_core), PY, "-m", "tensorwire", "serve",
         "bench.support.batching_service:BatchModel", "--http-port", str(http_port),
         "--grpc-port", str(grpc_port), "--log-level", "warning"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/readyz", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("server did not start") from None
                time.sleep(0.1)
        targets = {
            "http": lambda api: ["http", f"http://127.0.0.1:{http_port}/{api}"],
            "grpc": lambda api: ["grpc", f"127.0.0.1:{grpc_port}", "--method",
                                 "/batch_model.BatchModel/" + "".join(
                                     w.title() for w in api.split("_"))],
        }
        results: dict = {"machine": {"python": platform.python_version(),
                                     "cpus": os.cpu_count(),
                                     "pinning": f"server CPU {server_core}, load CPU "
                                                f"{load_core}" if server_core is not None
                                     else "not pinned"},
                         "model": "2 ms + 0.02 ms/item, one call at a time",
                         "concurrency": a.concurrency, "protocols": {}}
        for protocol, target in targets.items():
            load(load_core, *target("predict_batched"), "--concurrency", "8",
                 "--seconds", "1")  # warm-up
            lone = load(load_core, *target("predict_batched"), "--concurrency", "1",
                        "--seconds", str(a.seconds))
            rounds = []
            for _ in range(a.rounds):
                cpu0 = cpu_seconds(server.pid)
                plain = load(load_core, *target("predict"), "--concurrency",
                             str(a.concurrency), "--seconds", str(a.seconds))
                plain["server_us_per_req"] = ((cpu_seconds(server.pid) - cpu0)
                                              / max(1, plain["requests"]) * 1e6)
                before, cpu0 = scrape(http_port), cpu_seconds(server.pid)
                batched = load(load_core, *target("predict_batched"), "--concurrency",
                               str(a.concurrency), "--seconds", str(a.seconds))
                batched.update(observed(before, scrape(http_port),
                                        cpu_seconds(server.pid) - cpu0, batched["requests"]))
                rounds.append({"unbatched": plain, "batched": batched,
                               "ratio": batched["rps"] / plain["rps"]})
            med = {
                "lone_p50_ms": lone["p50_ms"], "lone_p99_ms": lone["p99_ms"],
                "unbatched_rps": statistics.median(r["unbatched"]["rps"] for r in rounds),
                "unbatched_p99_ms": statistics.median(r["unbatched"]["p99_ms"]
                                                      for r in rounds),
                "batched_rps": statistics.median(r["batched"]["rps"] for r in rounds),
                "batched_p99_ms": statistics.median(r["batched"]["p99_ms"] for r in rounds),
                "throughput_ratio": statistics.median(r["ratio"] for r in rounds),
                "unbatched_errors": sum(failed_calls(r["unbatched"]) for r in rounds),
                "batched_errors": sum(failed_calls(r["batched"]) for r in rounds),
                "lone_errors": failed_calls(lone),
            }
            med["errors"] = med["unbatched_errors"] + med["batched_errors"] + med["lone_errors"]
            for key in ("server_us_per_req", "mean_batch", "mean_queue_wait_ms"):
                med[key] = statistics.median(r["batched"][key] for r in rounds)
            med["unbatched_server_us_per_req"] = statistics.median(
                r["unbatched"]["server_us_per_req"] for r in rounds)
            med["p99_vs_lone"] = med["batched_p99_ms"] / med["lone_p50_ms"]
            # The floor the protocol CPU sets (the model sleeps: it uses no CPU). A
            # closed loop of N clients on one server core waits, on average, for the
            # per-request work of all N: N x CPU/request (Little's law), and a batch of
            # N takes the model 2 + 0.02 N ms. p99 cannot be below the larger of them.
            cpu_bound_ms = a.concurrency * med["server_us_per_req"] / 1e3
            model_ms = 2.0 + 0.02 * min(a.concurrency, 64)
            med["protocol_cpu_bound_ms"] = cpu_bound_ms
            med["latency_floor_ms"] = max(cpu_bound_ms, model_ms)
            med["p99_vs_floor"] = med["batched_p99_ms"] / med["latency_floor_ms"]
            med["targets_met"] = {
                name: target_met(condition, med["errors"]) for name, condition in (
                    ("throughput_5x", med["throughput_ratio"] >= 5),
                    ("p99_within_3x_lone", med["p99_vs_lone"] <= 3),
                    ("batched_p99_below_unbatched",
                     med["batched_p99_ms"] < med["unbatched_p99_ms"]))}
            results["protocols"][protocol] = {"median": med, "rounds": rounds, "lone": lone}
        print(f"adaptive batching, {a.concurrency} clients, {a.rounds} rounds of "
              f"{a.seconds:g} s, {results['machine']['pinning']}")
        print(f"{'protocol':8} {'lone p50':>9} {'unbatched rps':>14} {'failed':>7} "
              f"{'p99':>8} {'batched rps':>12} {'failed':>7} {'p99':>8} {'ratio':>6} "
              f"{'p99/lone':>9}")
        for protocol, r in results["protocols"].items():
            m = r["median"]
            print(f"{protocol:8} {m['lone_p50_ms']:8.2f}ms {m['unbatched_rps']:14.0f} "
                  f"{m['unbatched_errors']:7d} {m['unbatched_p99_ms']:6.1f}ms "
                  f"{m['batched_rps']:12.0f} {m['batched_errors']:7d} "
                  f"{m['batched_p99_ms']:6.1f}ms {m['throughput_ratio']:5.1f}x "
                  f"{m['p99_vs_lone']:8.1f}x")
        for protocol, r in results["protocols"].items():
            m = r["median"]
            goals = ", ".join(f"{name} {verdict(met, m['errors'])}"
                              for name, met in m["targets_met"].items())
            print(f"{protocol:8} server {m['server_us_per_req']:.0f} us CPU/request batched "
                  f"({m['unbatched_server_us_per_req']:.0f} unbatched), mean "
                  f"batch {m['mean_batch']:.1f}, mean queue wait "
                  f"{m['mean_queue_wait_ms']:.2f} ms; {m['errors']} failed calls "
                  f"({m['lone_errors']} of them lone); targets: {goals}")
        print(f"{'protocol':8} {'batched p99':>12} {'CPU bound':>10} {'floor':>8} "
              f"{'p99/floor':>10}  (CPU bound: {a.concurrency} clients x CPU/request on "
              "one core; floor: that or the model's time for one full batch)")
        for protocol, r in results["protocols"].items():
            m = r["median"]
            print(f"{protocol:8} {m['batched_p99_ms']:10.1f}ms "
                  f"{m['protocol_cpu_bound_ms']:8.1f}ms {m['latency_floor_ms']:6.1f}ms "
                  f"{m['p99_vs_floor']:9.1f}x")
        print("targets: ratio >= 5x, p99 <= 3x the lone-request latency, batched p99 < "
              "unbatched p99; each met only with no failed call")
        out = ROOT / "bench" / "results" / "batching.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"wrote {out.relative_to(ROOT)}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
