"""What one call to a dependency costs: in-process, over gRPC on loopback, and BentoML's.

    .venv/bin/python bench/composition.py            # ~4 min (the first run also builds
                                                     # .venv-bentoml, ~3 min)
    .venv/bin/python bench/composition.py --quick
    .venv/bin/python bench/composition.py --without-bentoml

The same two-service graph (`bench/support/composition_services.py`: a `Pipeline` that calls
its `Model`'s `echo` on a float32 tensor, `n` times per request) served three ways, all
at once, measured in turns (A B C A B C ...) so that a shared machine's drift hits all:

- **tw in-process**: `tensorwire serve bench.support.composition_services:Pipeline`, the model
  run by the same server, each call through its request plan (no bytes);
- **tw gRPC**: the model in a server process of its own, the pipeline started with
  `--dependency Model=grpc://127.0.0.1:PORT` (tensorwire's client, loopback);
- **BentoML 1.4.40**: the very same file with `tensorwire` renamed `bentoml`, served by
  `bentoml serve` (its `bentoml.depends`: the dependency in processes of its own, called
  over HTTP with pickled payloads), in `.venv-bentoml/` (bench/real_model.py's venv).

A request of the pipeline costs the same whatever `n` (one small JSON body in, a shape
out); the per-call cost of the dependency is `(t(n=N) - t(n=0)) / N`, the medians of
many sequential requests each, from one HTTP client on a kept-alive connection. Tensors
of 4 floats (the call's own cost) and of 1 MiB (what moving the tensor costs). Every
failed request is counted (bench/support/common.py's Failures): a target is met only when no
request to the servers it compares failed. Writes bench/results/composition.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import (
    PY,
    ROOT,
    Failures,
    Proc,
    failed_calls,
    free_port,
    http_ready,
    machine_info,
    running,
    table,
    target_met,
    verdict,
    write_results,
)

SERVICES = ROOT / "bench" / "composition_services.py"
#: Floats per tensor: 4 (a call's own cost), 262144 (1 MiB: moving it).
SIZES = {"4 floats": 4, "1 MiB": 262_144}
SERVERS = ("tw in-process", "tw gRPC", "BentoML")


def tensorwire(target: str, http: int, grpc: int, *extra: str) -> list[str]:
    return [PY, "-m", "tensorwire", "serve", target, "--http-port", str(http),
            "--grpc-port", str(grpc), "--no-v2", *extra]


class Client:
    """One kept-alive HTTP connection to a pipeline; times `fan` requests."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.failures = Failures()

    def fan(self, size: int, n: int) -> float | None:
        """Seconds one request took (None: it failed, and was counted)."""
        body = json.dumps({"size": size, "n": n}).encode()
        started = time.perf_counter()
        try:
            self.conn.request("POST", "/fan", body, {"Content-Type": "application/json"})
            answer = self.conn.getresponse()
            data = answer.read()
        except Exception as exc:  # a reset connection: count it, connect again
            self.failures.exception(exc)
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            return None
        elapsed = time.perf_counter() - started
        if answer.status != 200:
            self.failures.add(f"status {answer.status}", data[:200].decode(errors="replace"))
            return None
        if json.loads(data) != [1, size]:
            self.failures.add("bad answer", data[:200].decode(errors="replace"))
            return None
        return elapsed


def measure(clients: dict[str, Client], size: int, calls: int, rounds: int,
            per_round: int) -> dict[str, dict[str, Any]]:
    """Per-call µs of each server's dependency at `size`: rounds of `per_round` requests
    with n=0 and n=`calls`, servers in turn; the median over rounds."""
    samples: dict[str, list[float]] = {name: [] for name in clients}
    for _ in range(rounds):
        for name, client in clients.items():
            base = [t for t in (client.fan(size, 0) for _ in range(per_round)) if t]
            fanned = [t for t in (client.fan(size, calls) for _ in range(per_round)) if t]
            if base and fanned:
                per_call = (statistics.median(fanned) - statistics.median(base)) / calls
                samples[name].append(per_call * 1e6)
    out = {}
    for name, client in clients.items():
        values = samples[name]
        out[name] = {"us_per_call": statistics.median(values) if values else float("nan"),
                     "rounds": len(values), **client.failures.report()}
        client.failures = Failures()
    return out


def bentoml_server(http: int, workdir: Path) -> Proc:
    from bench.real_model import bento_env, bentoml_venv

    python = bentoml_venv()
    (workdir / "service.py").write_text(SERVICES.read_text().replace("tensorwire", "bentoml"))
    env = bento_env({"BENTOML_HOME": str(workdir / "home")})
    env["PYTHONPATH"] = str(workdir)
    proc = Proc("bentoml", [str(python.with_name("bentoml")), "serve", "service:Pipeline",
                            "--port", str(http)], env=env)
    proc.cmd = ["sh", "-c", f"cd {workdir} && exec " + " ".join(proc.cmd)]
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few rounds")
    parser.add_argument("--without-bentoml", action="store_true")
    parser.add_argument("--calls", type=int, default=20, help="dependency calls per request")
    args = parser.parse_args()
    rounds, per_round = (3, 5) if args.quick else (9, 15)
    ports = {name: (free_port(), free_port()) for name in (*SERVERS, "model")}
    model_grpc = ports["model"][1]
    procs = {
        "tw in-process": Proc("tw-inprocess", tensorwire(
            "bench.support.composition_services:Pipeline", *ports["tw in-process"])),
        "model": Proc("tw-model", tensorwire("bench.support.composition_services:Model",
                                             *ports["model"])),
        "tw gRPC": Proc("tw-grpc", tensorwire(
            "bench.support.composition_services:Pipeline", *ports["tw gRPC"],
            "--dependency", f"Model=grpc://127.0.0.1:{model_grpc}")),
    }
    workdir = Path(tempfile.mkdtemp(prefix="bench-composition-"))
    names = [n for n in SERVERS if n != "BentoML" or not args.without_bentoml]
    if "BentoML" in names:
        procs["BentoML"] = bentoml_server(ports["BentoML"][0], workdir)
    results: dict[str, Any] = {"machine": machine_info(), "calls": args.calls, "sizes": {}}

    def ready(proc: Proc) -> None:
        port = next(ports[n][0] for n, p in procs.items() if p is proc)
        http_ready(f"http://127.0.0.1:{port}/readyz", proc, timeout=180)

    with running(list(procs.values()), ready):
        clients = {name: Client(ports[name][0]) for name in names}
        for label, size in SIZES.items():
            for client in clients.values():  # warm-up: connections, first calls
                client.fan(size, args.calls)
            results["sizes"][label] = measure(clients, size, args.calls, rounds, per_round)
            rows = [[name, r["us_per_call"], r["rounds"], r["errors"]]
                    for name, r in results["sizes"][label].items()]
            print(f"\n{label} per dependency call ({args.calls} calls a request):")
            print(table(["server", "µs/call", "rounds", "failed"], rows))
    results["targets"] = targets(results["sizes"], names)
    for line in results["targets"]:
        print(f"{line['target']}: {line['ratio']:.1f}x -> {line['verdict']}")
    print(f"wrote {write_results('composition', results).relative_to(ROOT)}")
    return 0


def targets(sizes: dict[str, dict[str, dict[str, Any]]], names: list[str]
            ) -> list[dict[str, Any]]:
    """In-process cheaper than gRPC on loopback; tensorwire's gRPC cheaper than
    BentoML's call, at both sizes (met only with no failed request on either side)."""
    out = []
    pairs = [("tw in-process", "tw gRPC")]
    if "BentoML" in names:
        pairs.append(("tw gRPC", "BentoML"))
    for label, by_server in sizes.items():
        for fast, slow in pairs:
            a, b = by_server[fast], by_server[slow]
            failed = failed_calls(a, b)
            ratio = b["us_per_call"] / a["us_per_call"]
            met = target_met(ratio > 1, failed)
            out.append({"target": f"{label}: {fast} cheaper than {slow}", "ratio": ratio,
                        "met": met, "failed": failed, "verdict": verdict(met, failed)})
    return out


if __name__ == "__main__":
    os.environ.setdefault("BENTOML_DO_NOT_TRACK", "True")
    raise SystemExit(main())
