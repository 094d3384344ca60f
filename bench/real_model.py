"""The trained digits CNN under load: tensorwire batched, unbatched, and BentoML 1.4.40.

    .venv/bin/python bench/real_model.py             # full run (~15 min; the first also
                                                     # builds .venv-bentoml, ~3 min)
    .venv/bin/python bench/real_model.py --quick     # one short round per case
    .venv/bin/python bench/real_model.py --concurrency 64 --runs 5 --without-bentoml
                                                     # five runs in a row, fresh servers

One held-out digit per request (`[1, 1, 8, 8]` float32), 1, 16 and 64 closed-loop
clients, over HTTP (the same JSON body to every server) and gRPC, side by side in one
run, the servers taking turns (A B C A B C ...) so a shared machine's drift hits all:

- **tensorwire batched**: `tensorwire serve examples.digits:Digits` (`batchable=True`);
- **tensorwire unbatched**: `tensorwire serve bench.support.real_model_service:DigitsUnbatched`,
  the same model and API without `batchable`;
- **BentoML 1.4.40** with its own batching, in a venv of its own that this script makes,
  `.venv-bentoml/` at the repository root (never the project's venv): over HTTP its 1.4
  SDK (`bench/support/baselines/bentoml_digits.py`, `@bentoml.api(batchable=True)`); over gRPC,
  which that SDK does not serve, its legacy Runner API (`bentoml_digits_grpc.py`, a
  batchable runner method behind `bentoml serve-grpc`).

All run the same weights on the same device with the same preprocessing, one process
(`workers=1`, `--api-workers 1`) pinned to one core with `OMP_NUM_THREADS=1`; the load
generator (wrk for HTTP when installed, else aiohttp; grpc.aio for gRPC) runs on the other
core. Batch size cap 64 everywhere; BentoML keeps its default `max_latency_ms` (60000:
it never refuses for time) unless `--bentoml-latency-ms` says otherwise, and its access
log is turned off, as tensorwire's is by default. Before anything is measured every
server must answer the held-out digits with the labels and probabilities of offline
inference (to 1e-6). Reports requests/s with the failed calls beside them (every
failed call is counted by the load clients, by kind; a target is met only when no call to
the servers it compares failed), p50 and p99 (medians over rounds), server CPU per
request, the mean batch (items per model call over all rounds) and the targets; with
`--runs N` the whole measurement runs N times in a row, each with fresh servers, and each
run's mean batch, requests/s and failed calls are printed. Writes
bench/results/real_model.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench.support.common import (
    CLK_TCK,
    PY,
    ROOT,
    Pinning,
    Proc,
    busy_share,
    core_times,
    failed_calls,
    free_port,
    http_ready,
    machine_info,
    rps_and_failures,
    run_load,
    table,
    target_met,
    verdict,
    wait_quiet,
    write_results,
    wrk_result,
)

BENTO_VENV = ROOT / ".venv-bentoml"
BENTOML = "bentoml[grpc]==1.4.40"
#: torch: the project's own CPU wheel. protobuf 4: BentoML picks its protobuf-4 gRPC stubs
#: only for a version starting with "4" and otherwise imports google.protobuf.service,
#: gone since protobuf 6. grpcio 1.62: the opentelemetry-instrumentation-grpc BentoML
#: wraps servicers in lacks `abort_with_status`, abstract in newer grpcio (every call
#: fails with a TypeError).
BENTO_PINS = ("torch==2.13.0", "protobuf>=4.21,<5", "grpcio==1.62.3")
LUA = ROOT / "bench" / "support" / "load" / "post.lua"
BENTO_METHOD = "/bentoml.grpc.v1.BentoService/Call"
CHECK_DIGITS = 8
ATOL = 1e-6
SERVERS = ("tw-batched", "tw-unbatched", "bentoml")
METRICS = ("rps", "p50_ms", "p99_ms", "server_us_per_req", "foreign_cpu")
NAN = float("nan")


# ---------------------------------------------------------------------- BentoML's venv


def bentoml_venv(rebuild: bool = False) -> Path:
    """`.venv-bentoml` with bentoml 1.4.40 and its pins (made once, reused after)."""
    python = BENTO_VENV / "bin" / "python"
    marker = BENTO_VENV / ".bench-installed"
    wanted = " ".join([BENTOML, *BENTO_PINS])
    if not rebuild and python.exists() and marker.exists() and marker.read_text() == wanted:
        return python
    print(f"making {BENTO_VENV.relative_to(ROOT)}/ ({wanted}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(BENTO_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", BENTOML, *BENTO_PINS],
                   check=True)
    marker.write_text(wanted)
    return python


def bento_version(python: Path) -> str:
    out = subprocess.run([str(python), "-c", "import bentoml; print(bentoml.__version__)"],
                         capture_output=True, text=True, check=True, env=bento_env({}))
    return out.stdout.strip()


def bento_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV",
                                                                      "PYTHONHOME"))}
    return {**env, "PYTHONPATH": str(ROOT), "BENTOML_DO_NOT_TRACK": "True", **extra}


# ---------------------------------------------------------------------- servers


class Group(Proc):
    """A server whose CPU is that of all its processes (BentoML runs several)."""

    def cpu_seconds(self) -> float:
        procs: dict[int, tuple[int, int, int]] = {}  # pid -> (ppid, session, ticks)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                procs[int(stat.parent.name)] = (int(fields[1]), int(fields[3]),
                                                int(fields[11]) + int(fields[12]))
        # its session (it was started in a new one) and, should a worker leave that,
        # every descendant
        mine = {pid for pid, (_, sid, _) in procs.items() if sid == self.pid}
        grew = True
        while grew:
            more = {pid for pid, (ppid, _, _) in procs.items()
                    if ppid in mine and pid not in mine}
            mine |= more
            grew = bool(more)
        return sum(procs[pid][2] for pid in mine) / CLK_TCK


def tensorwire_cmd() -> list[str]:
    exe = Path(PY).with_name("tensorwire")
    return [str(exe)] if exe.exists() else [PY, "-m", "tensorwire"]


def make_servers(pin: Pinning, bento_python: Path | None, home: Path, latency_ms: int
                 ) -> dict[str, dict[str, Any]]:
    """name -> {proc, http, grpc, method}: every server of the run, not yet started
    (BentoML's two only with its venv)."""
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out: dict[str, dict[str, Any]] = {}
    for name, target in (("tw-batched", "examples.digits:Digits"),
                         ("tw-unbatched", "bench.support.real_model_service:DigitsUnbatched")):
        http, grpc = free_port(), free_port()
        out[name] = {"proc": Group(name, [*pin.prefix("server"), *tensorwire_cmd(), "serve",
                                          target, "--http-port", str(http), "--grpc-port",
                                          str(grpc), "--log-level", "warning"], env=threads),
                     "http": f"http://127.0.0.1:{http}", "grpc": f"127.0.0.1:{grpc}",
                     "target": target}
    if bento_python is None:
        return out
    bentoml = str(bento_python.with_name("bentoml"))
    knobs = {"BENTOML_HOME": str(home), "BENTOML_DIGITS_BATCH": "64",
             "BENTOML_DIGITS_LATENCY_MS": str(latency_ms), **threads}
    http = free_port()
    out["bentoml-http"] = {"proc": Group("bentoml-http", [
        *pin.prefix("server"), bentoml, "serve",
        "bench.support.baselines.bentoml_digits:DigitsBento",
        "--host", "127.0.0.1", "--port", str(http)], env=bento_env({
            **knobs, "BENTOML_CONFIG_OPTIONS": "api_server.logging.access.enabled=false"})),
        "http": f"http://127.0.0.1:{http}"}
    grpc, metrics = free_port(), free_port()
    out["bentoml-grpc"] = {"proc": Group("bentoml-grpc", [
        *pin.prefix("server"), bentoml, "serve-grpc",
        "bench.support.baselines.bentoml_digits_grpc:svc",
        "--host", "127.0.0.1", "--port", str(grpc), "--api-workers", "1"], env=bento_env({
            **knobs, "BENTOML_CONFIG_OPTIONS": "api_server.logging.access.enabled=false "
            f"api_server.grpc.metrics.port={metrics} runners.digits.resources.cpu=1"})),
        "grpc": f"127.0.0.1:{grpc}"}
    return out


def grpc_answers(target: str, method: str, payload: bytes, proc: Proc, timeout: float = 180
                 ) -> None:
    """Wait until a raw unary call succeeds (BentoML starts its runner after the port)."""
    import grpc

    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(method)
        while True:
            try:
                call(payload, timeout=5)
                return
            except grpc.RpcError:
                if not proc.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"{proc.name}: no answer on {target}\n"
                                       f"{proc.logs()[-3000:]}") from None
                time.sleep(0.5)


# ---------------------------------------------------------------------- answers


def offline(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import torch

    from examples.digits_model import load_model, predict

    labels, probabilities = predict(load_model(), torch.from_numpy(x))
    return labels.numpy(), probabilities.numpy()


def post_json(url: str, body: bytes) -> Any:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def check_answers(servers: dict[str, dict[str, Any]], x: np.ndarray,
                  bento_python: Path | None, home: Path) -> dict[str, bool]:
    """Every server, on both protocols, answers the held-out digits as offline inference."""
    import tensorwire

    want_labels, want_probs = offline(x)
    got: dict[str, tuple[list, list]] = {}
    for name in ("tw-batched", "tw-unbatched"):
        s = servers[name]
        labels, probs = [], []
        for i in range(len(x)):
            v = post_json(s["http"] + "/classify", json.dumps(x[i:i + 1].tolist()).encode())
            labels += v["label"]
            probs += v["probabilities"]
        got[f"{name} http"] = (labels, probs)
        with tensorwire.SyncClient(f"grpc://{s['grpc']}") as client:
            answers = [client.classify(x[i:i + 1]) for i in range(len(x))]
        got[f"{name} grpc"] = ([int(a["label"][0]) for a in answers],
                               [a["probabilities"][0].tolist() for a in answers])
    if bento_python is not None:
        got.update(check_bentoml(servers, x, bento_python, home))
    result = {}
    for key, (labels, probs) in got.items():
        result[key] = bool(np.array_equal(np.asarray(labels), want_labels) and np.allclose(
            np.asarray(probs, dtype=np.float64), want_probs, rtol=0, atol=ATOL))
    if not all(result.values()):
        raise RuntimeError(f"a server disagrees with offline inference: {result}")
    return result


def check_bentoml(servers: dict[str, dict[str, Any]], x: np.ndarray, bento_python: Path,
                  home: Path) -> dict[str, tuple[list, list]]:
    """BentoML's answers to the held-out digits over HTTP and gRPC."""
    got: dict[str, tuple[list, list]] = {}
    items = [post_json(servers["bentoml-http"]["http"] + "/classify",
                       json.dumps(x[i:i + 1].tolist()).encode())[0] for i in range(len(x))]
    got["bentoml http"] = ([v["label"] for v in items], [v["probabilities"] for v in items])
    out = subprocess.run([str(bento_python), "-m", "bench.support.baselines.bentoml_grpc_tool",
                          "call",
                          servers["bentoml-grpc"]["grpc"], *map(str, range(len(x)))],
                         capture_output=True, text=True, check=True,
                         env=bento_env({"BENTOML_HOME": str(home)}), cwd=ROOT)
    v = json.loads(out.stdout.strip().splitlines()[-1])
    got["bentoml grpc"] = (v["label"], v["probabilities"])
    return got


# ---------------------------------------------------------------------- load


def batch_counts(http_url: str) -> tuple[float, float]:
    """(sum, count) of tensorwire_batch_size for the classify API, from /metrics."""
    total = count = 0.0
    with urllib.request.urlopen(http_url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("tensorwire_batch_size_") and 'api="classify"' in line:
                name = line.split("{", 1)[0]
                if name.endswith("_sum"):
                    total += float(line.rsplit(" ", 1)[1])
                elif name.endswith("_count"):
                    count += float(line.rsplit(" ", 1)[1])
    return total, count


def measure(args: argparse.Namespace, pin: Pinning, proc: Proc, load: list[str],
            wrk: bool, batches_from: str | None) -> dict[str, Any]:
    """One load run; the server's CPU and the cores' business are read around it."""
    waited = wait_quiet(pin.cores(), max_wait=args.max_wait)
    marks: dict[str, Any] = {}

    def mark() -> None:
        marks["cpu"], marks["cores"] = proc.cpu_seconds(), core_times()
        if batches_from:
            marks["batches"] = batch_counts(batches_from)

    if wrk:
        warm = run_load([*load, f"-d{max(1, round(args.warmup))}s"])
        mark()
        res = wrk_result(run_load([*load, f"-d{max(1, round(args.duration))}s"]), warm)
        client = res["client_cpu_s"] / res["elapsed_s"]
    else:
        res = run_load(load, on_warm=mark)
        client = res["client_cpu"]
    used = proc.cpu_seconds() - marks["cpu"]
    after = core_times()
    res["server_cpu"] = used / res["elapsed_s"]
    res["server_us_per_req"] = used / max(1, res["requests"]) * 1e6
    if pin.server is not None:
        busy = sum(busy_share(marks["cores"], after, c) for c in pin.cores())
        res["foreign_cpu"] = max(0.0, busy - res["server_cpu"] - client)
    if batches_from:
        total, count = batch_counts(batches_from)
        t0, c0 = marks["batches"]
        res["batch_items"], res["batches"] = total - t0, count - c0
        res["mean_batch"] = (total - t0) / (count - c0) if count > c0 else NAN
    res["waited_quiet_s"] = waited
    return res


def load_cmds(pin: Pinning, args: argparse.Namespace, body: str, tw_hex: dict[str, str],
              bento_hex: str, servers: dict[str, dict[str, Any]], protocol: str,
              name: str, c: int) -> tuple[list[str], bool]:
    """The load generator's command line for one server, and whether it is wrk."""
    if protocol == "http":
        url = (servers["bentoml-http"]["http"] if name == "bentoml"
               else servers[name]["http"]) + "/classify"
        if args.load == "wrk":
            return (["env", f"BENCH_BODY={body}", *pin.prefix("load"), "wrk", "-t1",
                     f"-c{c}", "--latency", "-s", str(LUA), url], True)
        return ([*pin.prefix("load"), PY, "-m", "bench.support.load.http_client", "--url", url,
                 "--body", body, "--concurrency", str(c), "--duration", str(args.duration),
                 "--warmup", str(args.warmup)], False)
    if name == "bentoml":
        target, method, payload = servers["bentoml-grpc"]["grpc"], BENTO_METHOD, bento_hex
    else:
        target, (method, payload) = servers[name]["grpc"], tw_hex[name].split(" ")
    return ([*pin.prefix("load"), PY, "-m", "bench.support.load.grpc_client", "--target", target,
             "--method", method, "--request-hex", payload, "--concurrency", str(c),
             "--duration", str(args.duration), "--warmup", str(args.warmup)], False)


def tensorwire_requests(servers: dict[str, dict[str, Any]], x: np.ndarray) -> dict[str, str]:
    """name -> 'METHOD HEX': the serialized ClassifyRequest of each tensorwire server."""
    import importlib

    import tensorwire
    from tensorwire.protobuf.descriptors import service_proto

    out = {}
    for name in ("tw-batched", "tw-unbatched"):
        module, cls = servers[name]["target"].split(":")
        proto = service_proto(tensorwire.get_service_spec(
            getattr(importlib.import_module(module), cls)))
        msg = proto.messages["classify"].request({"x": x})
        out[name] = f"{proto.method_names['classify']} {msg.SerializeToString().hex()}"
    return out


# ---------------------------------------------------------------------- report


def summarize(rounds: list[dict[str, dict[str, Any]]], names: tuple[str, ...] = SERVERS
              ) -> dict[str, Any]:
    """Medians over rounds per server, the medians of per-round ratios, every server's
    failed calls (all rounds, warm-up included), and the batched server's mean batch: the
    items of all its model calls over the rounds / the number of calls."""
    def med(values: list[float]) -> float:
        values = [v for v in values if v == v]
        return statistics.median(values) if values else NAN

    def ratio(a: str, b: str, metric: str = "rps") -> float:
        return med([r[a][metric] / r[b][metric] for r in rounds if r[b][metric]])

    out: dict[str, Any] = {}
    for name in names:
        out[name] = {m: med([r[name].get(m, NAN) for r in rounds]) for m in METRICS}
        out[name]["errors"] = sum(failed_calls(r[name]) for r in rounds)
        if name == "tw-batched":
            items = sum(r[name].get("batch_items", 0.0) for r in rounds)
            calls = sum(r[name].get("batches", 0.0) for r in rounds)
            out[name]["mean_batch"] = items / calls if calls else NAN
    out["batched_vs_unbatched_rps"] = ratio("tw-batched", "tw-unbatched")
    if "bentoml" in names:
        out["batched_vs_bentoml_rps"] = ratio("tw-batched", "bentoml")
        out["bentoml_vs_batched_p99"] = ratio("bentoml", "tw-batched", "p99_ms")
    return out


def targets(summary: dict[str, dict[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The targets at 64 clients per protocol; each is met only when its figure holds and
    not one call to the servers it compares failed."""
    out = []
    for protocol, by_c in summary.items():
        s = by_c.get(64)
        if s is None:
            continue
        b, u = s["tw-batched"], s["tw-unbatched"]
        goals = [
            ("mean batch >= 8 at 64 clients (issue 37)", b["mean_batch"],
             b["mean_batch"] >= 8, failed_calls(b)),
            ("batched >= 1.5x unbatched rps at 64 clients (issue 37)",
             s["batched_vs_unbatched_rps"], s["batched_vs_unbatched_rps"] >= 1.5,
             failed_calls(b, u)),
            ("batched >= 3x unbatched rps at 64 clients", s["batched_vs_unbatched_rps"],
             s["batched_vs_unbatched_rps"] >= 3, failed_calls(b, u)),
        ]
        if "bentoml" in s:
            m = s["bentoml"]
            goals += [
                ("batched >= 5x BentoML rps at 64 clients", s["batched_vs_bentoml_rps"],
                 s["batched_vs_bentoml_rps"] >= 5, failed_calls(b, m)),
                ("batched p99 < BentoML p99 at 64 clients", s["bentoml_vs_batched_p99"],
                 b["p99_ms"] < m["p99_ms"], failed_calls(b, m)),
            ]
        out += [{"protocol": protocol, "case": case, "value": value,
                 "met": target_met(holds, failed), "failed": failed}
                for case, value, holds, failed in goals]
    return out


def print_report(summary: dict[str, dict[int, dict[str, Any]]],
                 goals: list[dict[str, Any]]) -> None:
    names = [n for n in SERVERS if any(n in s for by_c in summary.values()
                                       for s in by_c.values())]
    short = {"tw-batched": "batched", "tw-unbatched": "unbatched", "bentoml": "bentoml"}
    rows = []
    for protocol, by_c in summary.items():
        for c, s in by_c.items():
            row: list[Any] = [protocol, c]
            for name in names:
                row += [s[name]["rps"], failed_calls(s[name])]
            row.append(f"{s['batched_vs_unbatched_rps']:.2f}x")
            if "bentoml" in names:
                row.append(f"{s['batched_vs_bentoml_rps']:.1f}x")
            row += [s[n]["p50_ms"] for n in names] + [s[n]["p99_ms"] for n in names]
            rows.append([*row, s["tw-batched"]["mean_batch"]])
    headers = ["proto", "clients"]
    for name in names:
        headers += [f"{short[name]} rps", "failed"]
    headers.append("b/unb")
    if "bentoml" in names:
        headers.append("b/bento")
    headers += [f"{short[n]} p50" for n in names] + [f"{short[n]} p99" for n in names]
    print()
    print(table([*headers, "mean batch"], rows))
    print("(ms; x: median of per-round ratios; failed: failed calls of all rounds, warm-up "
          "included; mean batch: items per tensorwire model call over all rounds)")
    for g in goals:
        print(f"target {g['protocol']}: {g['case']}: {g['value']:.2f} "
              f"({verdict(g['met'], g['failed'])})")


def run_line(index: int, runs: int, summary: dict[str, dict[int, dict[str, Any]]]) -> str:
    """One run's mean batch, requests/s and failed calls per protocol, on one line each."""
    lines = []
    for protocol, by_c in summary.items():
        for c, s in by_c.items():
            b, u = s["tw-batched"], s["tw-unbatched"]
            lines.append(f"run {index}/{runs} {protocol:4} c={c:<3} mean batch "
                         f"{b['mean_batch']:5.1f}  batched {b['rps']:8.1f} rps "
                         f"{failed_calls(b)} failed  unbatched {u['rps']:8.1f} rps "
                         f"{failed_calls(u)} failed  batched/unbatched "
                         f"{s['batched_vs_unbatched_rps']:.2f}x  server CPU/req "
                         f"{b['server_us_per_req']:.0f} vs {u['server_us_per_req']:.0f} us")
    return "\n".join(lines)


def every_run(repeats: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each target over all runs: met only when met in every run, with every run's
    figure and the failed calls of all runs together."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for goals in repeats:
        for g in goals:
            seen = out.setdefault((g["protocol"], g["case"]), {
                "protocol": g["protocol"], "case": g["case"], "values": [], "met": True,
                "failed": 0})
            seen["values"].append(g["value"])
            seen["met"] = seen["met"] and g["met"]
            seen["failed"] += g["failed"]
    return list(out.values())


# ---------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured run")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per run")
    p.add_argument("--rounds", type=int, default=3, help="rounds of A B C per case")
    p.add_argument("--runs", type=int, default=1,
                   help="whole measurements in a row, each with freshly started servers")
    p.add_argument("--concurrency", default="1,16,64",
                   type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--protocols", default="http,grpc", type=lambda s: s.split(","))
    p.add_argument("--load", choices=["auto", "wrk", "aiohttp"], default="auto")
    p.add_argument("--without-bentoml", action="store_true",
                   help="tensorwire batched and unbatched only (no .venv-bentoml)")
    p.add_argument("--bentoml-latency-ms", type=int, default=60000,
                   help="BentoML's max_latency_ms (its default: 60000)")
    p.add_argument("--max-wait", type=float, default=10.0,
                   help="seconds to wait for quiet cores before each run")
    p.add_argument("--noise", type=float, default=0.25,
                   help="re-run when other processes used more than this share of a core")
    p.add_argument("--retries", type=int, default=1, help="re-runs of a noisy run")
    p.add_argument("--rebuild-venv", action="store_true", help="remake .venv-bentoml")
    p.add_argument("--quick", action="store_true", help="one round of 2 s per case")
    a = p.parse_args(argv)
    if a.quick:
        a.duration, a.rounds, a.warmup = 2.0, 1, 0.5
    if a.load == "auto":
        a.load = "wrk" if shutil.which("wrk") else "aiohttp"
    return a


def run_once(args: argparse.Namespace, pin: Pinning, bento_python: Path | None,
             x: np.ndarray) -> dict[str, Any]:
    """Start every server, check their answers, measure every case, stop them."""
    names = SERVERS if bento_python is not None else SERVERS[:2]
    digit = x[:1]
    body = json.dumps(digit.tolist())
    home = Path(tempfile.mkdtemp(prefix="bench-bentoml-home-"))
    servers = make_servers(pin, bento_python, home, args.bentoml_latency_ms)
    procs = [s["proc"] for s in servers.values()]
    bento_hex = "" if bento_python is None else subprocess.run(
        [str(bento_python), "-m", "bench.support.baselines.bentoml_grpc_tool", "request", "0"],
        capture_output=True, text=True, check=True, cwd=ROOT,
        env=bento_env({"BENTOML_HOME": str(home)})).stdout.strip().splitlines()[-1]
    tw_hex = tensorwire_requests(servers, digit)
    results: dict[str, dict[int, list[dict[str, dict[str, Any]]]]] = {}
    try:
        for p in procs:
            p.start()
        for s in servers.values():
            if "http" in s:
                try:
                    http_ready(s["http"] + "/readyz", s["proc"], timeout=300)
                except Exception as exc:  # say why: the server's own last words
                    raise RuntimeError(f"{exc}\n{s['proc'].logs()[-3000:]}") from None
        for name in ("tw-batched", "tw-unbatched"):
            method, payload = tw_hex[name].split(" ")
            grpc_answers(servers[name]["grpc"], method, bytes.fromhex(payload),
                         servers[name]["proc"])
        if bento_python is not None:
            grpc_answers(servers["bentoml-grpc"]["grpc"], BENTO_METHOD,
                         bytes.fromhex(bento_hex), servers["bentoml-grpc"]["proc"],
                         timeout=300)
        answers = check_answers(servers, x[:CHECK_DIGITS], bento_python, home)
        print(f"every server answers {CHECK_DIGITS} held-out digits as offline inference "
              f"(labels equal, probabilities to {ATOL:g}): {answers}", flush=True)
        for protocol in args.protocols:
            for c in args.concurrency:
                for r in range(args.rounds):
                    round_: dict[str, dict[str, Any]] = {}
                    for name in names:
                        proc = servers[f"bentoml-{protocol}" if name == "bentoml"
                                       else name]["proc"]
                        cmd, wrk = load_cmds(pin, args, body, tw_hex, bento_hex, servers,
                                             protocol, name, c)
                        batches = servers[name]["http"] if name == "tw-batched" else None
                        for attempt in range(args.retries + 1):
                            res = measure(args, pin, proc, cmd, wrk, batches)
                            noise = res.get("foreign_cpu", 0.0)
                            if not noise > args.noise or attempt == args.retries:
                                break
                            print(f"    (other processes used {noise:.0%} of a core: "
                                  "measuring again)", flush=True)
                        res["attempts"] = attempt + 1
                        round_[name] = res
                        batch = (f" batch={res['mean_batch']:5.1f}" if "mean_batch" in res
                                 else "")
                        print(f"  {protocol:4} c={c:<3} round {r + 1}/{args.rounds} "
                              f"{name:12} {rps_and_failures(res['rps'], failed_calls(res))} "
                              f"p50={res['p50_ms']:8.2f}ms p99={res['p99_ms']:8.2f}ms "
                              f"server={res['server_us_per_req']:.0f}us/req others="
                              f"{res.get('foreign_cpu', NAN):.0%}{batch}", flush=True)
                        if res.get("first_error"):
                            print(f"    first failure: {res['first_error']}", flush=True)
                    results.setdefault(protocol, {}).setdefault(c, []).append(round_)
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(home, ignore_errors=True)
    summary = {protocol: {c: summarize(rs, names) for c, rs in by_c.items()}
               for protocol, by_c in results.items()}
    return {"summary": summary, "targets": targets(summary), "answers_checked": answers,
            "runs": results}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pin = Pinning.detect()
    bento_python = None if args.without_bentoml else bentoml_venv(args.rebuild_venv)
    from examples.digits_model import load_heldout

    x = load_heldout()[0]
    info = machine_info()
    if bento_python is not None:
        info["versions"]["bentoml"] = bento_version(bento_python)
    print("== the digits CNN: tensorwire batched / unbatched"
          + ("" if bento_python is None else f" / BentoML {info['versions']['bentoml']}")
          + f"\nmachine: {info['cpu']}, {info['cores']} cores; {pin.describe()}; load: "
          f"{args.load}", flush=True)
    repeats = []
    for i in range(args.runs):
        if args.runs > 1:
            print(f"-- run {i + 1}/{args.runs} (fresh servers)", flush=True)
        repeats.append(run_once(args, pin, bento_python, x))
        print_report(repeats[-1]["summary"], repeats[-1]["targets"])
        print(run_line(i + 1, args.runs, repeats[-1]["summary"]), flush=True)
    goals = every_run([r["targets"] for r in repeats])
    if args.runs > 1:
        print(f"\n== {args.runs} runs in a row")
        for i, r in enumerate(repeats):
            print(run_line(i + 1, args.runs, r["summary"]))
        for g in goals:
            values = ", ".join(f"{v:.2f}" for v in g["values"])
            print(f"target {g['protocol']}: {g['case']}, every run: {values} "
                  f"({verdict(g['met'], g['failed'])})")
    payload = {
        "name": "real_model",
        "machine": info,
        "pinning": pin.describe(),
        "load": {"http": "wrk -t1 -cN, bench/support/load/post.lua" if args.load == "wrk"
                 else "bench.support.load.http_client (aiohttp)",
                 "grpc": "bench.support.load.grpc_client (grpc.aio, 1 channel)"},
        "config": {"duration_s": args.duration, "warmup_s": args.warmup,
                   "rounds": args.rounds, "runs": args.runs,
                   "concurrency": args.concurrency,
                   "bentoml": bento_python is not None,
                   "bentoml_latency_ms": args.bentoml_latency_ms, "max_batch_size": 64,
                   "noise": args.noise, "retries": args.retries,
                   "bentoml_venv": str(BENTO_VENV.relative_to(ROOT)),
                   "bentoml_install": " ".join([BENTOML, *BENTO_PINS]),
                   "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])},
        "request": "one held-out digit [1, 1, 8, 8] float32 per request",
        "repeats": [{**r, "summary": {p: {str(c): s for c, s in by_c.items()}
                                      for p, by_c in r["summary"].items()},
                     "runs": {p: {str(c): rs for c, rs in by_c.items()}
                              for p, by_c in r["runs"].items()}} for r in repeats],
        "targets": goals,
    }
    # a run without BentoML does not replace the full comparison's figures
    path = write_results("real_model" if bento_python is not None
                         else "real_model_without_bentoml", payload)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
