"""Scaling out: how calls spread over worker processes, and how many cores one uses.

    .venv/bin/python bench/workers.py            # ~5 min
    .venv/bin/python bench/workers.py --quick    # one round, shorter runs

Part 1, spreading. `tensorwire serve bench.support.services:Bench --workers N` (N = 1, 2) under
three loads, each with `--concurrency` (16) calls in flight from one load process:

- `grpc 1 channel`: `bench.support.load.grpc_client`, one grpc.aio channel (how a production
  client process usually talks to a server);
- `tensorwire client`: `bench.support.load.tw_client`, `tensorwire.AsyncClient` with its default
  channel pool;
- `http 16 conns`: `bench.support.load.http_client`, aiohttp with 16 keep-alive connections.

And once more `grpc 1 channel` against 2 workers whose connections age every second
(`--grpc-max-connection-age 1`): the server's remedy for clients that keep one channel.

Each worker's CPU ticks (utime + stime, /proc/PID/stat) are read when the load's warm-up
ends and when it stops; the table gives each worker's share of the server's CPU. Nothing
is pinned (the workers need both cores), so on a 2-core box the load generator competes
with the workers: judge by CPU share, not by requests/s. `other` is CPU of the machine
that was neither the server nor the load process (other work on a shared box).

Part 2, threads. One worker of `examples.similarity:Similarity` (a matrix product and a
partial sort per request; NumPy releases the GIL), BLAS pinned to one thread per call
(`OPENBLAS_NUM_THREADS=1`, ...), with `--threads 1` and `--threads 4`, under 8 HTTP
clients: the worker's CPU seconds per second of the run (cores used), and its threads'
on-CPU plus run-queue time per second (/proc/PID/task/*/schedstat: how many of its
threads were runnable at once, i.e. the cores it would use on an idle machine; a thread
waiting for the GIL sleeps and does not count). On a shared 2-core box the second figure
is the one other work cannot hide.

Writes bench/results/workers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.http_json import tensorwire_cmd
from bench.support.common import (
    CLK_TCK,
    PY,
    RESULTS,
    Proc,
    core_times,
    free_port,
    grpc_serving,
    http_ready,
    machine_info,
    run_load,
    running,
    table,
    wait_quiet,
    write_results,
)
from bench.support.model import BODY

#: The Bench.Predict request message (fields 1-4, doubles) for the raw grpc client.
PREDICT = "/bench.Bench/Predict"
SINGLE_THREAD_BLAS = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                             "MKL_NUM_THREADS")}


def predict_request_hex() -> str:
    """The serialized Predict request (what a protoc stub would send)."""
    import struct

    out = b""
    for number, value in enumerate(json.loads(BODY).values(), start=1):
        out += bytes([number << 3 | 1]) + struct.pack("<d", value)
    return out.hex()


def ticks(pid: int) -> int:
    """utime + stime of a process (all its threads), in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def runnable_ns(pid: int) -> int:
    """On-CPU plus run-queue nanoseconds of all threads of a process (schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waited = (task / "schedstat").read_text().split()[:2]
        except (OSError, ValueError):
            continue  # the thread ended in between
        total += int(on_cpu) + int(waited)
    return total


def children(pid: int) -> list[int]:
    """The direct child processes of `pid` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == pid:
            out.append(int(entry.name))
    return sorted(out)


def worker_pids(proc: Proc, workers: int, timeout: float = 60.0) -> list[int]:
    """The processes that serve: the server itself, or its supervisor's N workers."""
    if workers == 1:
        return [proc.pid]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = children(proc.pid)
        if len(pids) == workers:
            return pids
        time.sleep(0.1)
    raise RuntimeError(f"expected {workers} workers under pid {proc.pid}")


def server(workers: int, *extra: str, service: str = "bench.support.services:Bench",
           env: dict[str, str] | None = None) -> tuple[Proc, int, int]:
    http_port, grpc_port = free_port(), free_port()
    proc = Proc(f"tensorwire-{workers}w", [*tensorwire_cmd(), "serve", service,
                                          "--http-port", str(http_port),
                                          "--grpc-port", str(grpc_port),
                                          "--workers", str(workers), *extra],
                env=env or {})
    return proc, http_port, grpc_port


def measure(pids: list[int], load_cmd: list[str]) -> dict[str, Any]:
    """Run one load; each worker's CPU ticks between warm-up end and load end."""
    marks: dict[str, Any] = {}

    def warm() -> None:
        marks["ticks"] = [ticks(p) for p in pids]
        marks["runnable"] = sum(runnable_ns(p) for p in pids)
        marks["cores"] = core_times()
        marks["t"] = time.monotonic()

    result = run_load(load_cmd, on_warm=warm)
    after = [ticks(p) for p in pids]
    runnable = sum(runnable_ns(p) for p in pids) - marks["runnable"]
    cores_after = core_times()
    wall = time.monotonic() - marks["t"]
    used = [a - b for a, b in zip(after, marks["ticks"], strict=True)]
    total = sum(used) or 1
    busy = sum(cores_after[c][0] - marks["cores"][c][0] for c in cores_after)
    server_s = sum(used) / CLK_TCK
    client_s = result.get("client_cpu", 0.0) * result["elapsed_s"]
    return {
        "worker_ticks": used,
        "worker_share": [u / total for u in used],
        "server_cores": server_s / wall,
        "runnable_threads": runnable / 1e9 / wall,
        "client_cores": client_s / wall,
        "other_cores": max(0.0, busy - server_s - client_s) / wall,
        "rps": result["rps"],
        "errors": result["errors"],
    }


def loads(http_port: int, grpc_port: int, concurrency: int, duration: float,
          warmup: float) -> dict[str, list[str]]:
    timing = ["--concurrency", str(concurrency), "--duration", str(duration),
              "--warmup", str(warmup)]
    return {
        "grpc 1 channel": [PY, "-m", "bench.support.load.grpc_client",
                           "--target", f"127.0.0.1:{grpc_port}", "--method", PREDICT,
                           "--request-hex", predict_request_hex(), *timing],
        "tensorwire client": [PY, "-m", "bench.support.load.tw_client",
                              "--url", f"grpc://127.0.0.1:{grpc_port}", "--api", "predict",
                              "--kwargs", BODY.decode(), *timing],
        f"http {concurrency} conns": [PY, "-m", "bench.support.load.http_client",
                                      "--url", f"http://127.0.0.1:{http_port}/predict",
                                      "--body", BODY.decode(), *timing],
    }


def ready(proc: Proc, http_port: int, grpc_port: int) -> None:
    http_ready(f"http://127.0.0.1:{http_port}/readyz", proc)
    grpc_serving(f"127.0.0.1:{grpc_port}", proc)


def spreading(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    cases = [(1, ()), (2, ()), (2, ("--grpc-max-connection-age", "1"))]
    for workers, extra in cases:
        proc, http_port, grpc_port = server(workers, *extra)
        with running([proc], lambda p, h=http_port, g=grpc_port: ready(p, h, g)):
            pids = worker_pids(proc, workers)
            time.sleep(1.0)  # every worker loaded, not only the one that answered
            all_loads = loads(http_port, grpc_port, args.concurrency, args.duration,
                              args.warmup)
            if extra:  # the aged-connection case is about the one plain channel
                all_loads = {k: v for k, v in all_loads.items() if k == "grpc 1 channel"}
            for name, cmd in all_loads.items():
                for r in range(args.rounds):
                    wait_quiet(sorted(os.sched_getaffinity(0)), max_wait=args.max_wait)
                    m = measure(pids, cmd)
                    label = name + (" (age 1 s)" if extra else "")
                    rows.append({"workers": workers, "load": label, "round": r, **m})
                    shares = " / ".join(f"{s:.0%}" for s in m["worker_share"])
                    print(f"  {workers} worker(s)  {label:28} shares {shares:12} "
                          f"server {m['server_cores']:.2f} cores  client "
                          f"{m['client_cores']:.2f}  other {m['other_cores']:.2f}  "
                          f"{m['rps']:.0f} rps  failed {m['errors']}", flush=True)
    return rows


def threads(args: argparse.Namespace) -> list[dict[str, Any]]:
    queries = [[((i * 7 + j) % 13) / 13.0 - 0.5 for j in range(128)] for i in range(8)]
    body = json.dumps({"queries": queries, "k": 5})
    rows = []
    for n in (1, 4):
        proc, http_port, _ = server(1, "--threads", str(n), "--no-grpc",
                                            service="examples.similarity:Similarity",
                                            env=SINGLE_THREAD_BLAS)
        with running([proc], lambda p, h=http_port: http_ready(
                f"http://127.0.0.1:{h}/readyz", p)):
            for r in range(args.rounds):
                wait_quiet(sorted(os.sched_getaffinity(0)), max_wait=args.max_wait)
                m = measure([proc.pid], [
                    PY, "-m", "bench.support.load.http_client", "--url",
                    f"http://127.0.0.1:{http_port}/nearest", "--body", body,
                    "--concurrency", "8", "--duration", str(args.duration),
                    "--warmup", str(args.warmup)])
                rows.append({"threads": n, "round": r, **m})
                print(f"  --threads {n}  worker {m['server_cores']:.2f} cores, "
                      f"{m['runnable_threads']:.2f} threads runnable  client "
                      f"{m['client_cores']:.2f}  other {m['other_cores']:.2f}  "
                      f"{m['rps']:.0f} rps  failed {m['errors']}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--warmup", type=float, default=1.5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--max-wait", type=float, default=20.0,
                   help="seconds to wait for a quiet machine before each run")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--part", choices=("all", "spread", "threads"), default="all")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 4.0, 1.0
    info = machine_info()
    print(f"== workers: {info['cpu']}, {info['cores']} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    out: dict[str, Any] = {"machine": info, "concurrency": args.concurrency,
                           "duration_s": args.duration}
    previous = RESULTS / "workers.json"
    if args.part != "all" and previous.exists():  # keep the other part's last figures
        kept = json.loads(previous.read_text())
        out = {**{k: v for k, v in kept.items() if k in ("spreading", "threads")}, **out}
    if args.part in ("all", "spread"):
        print("-- spreading: each worker's share of the server's CPU", flush=True)
        out["spreading"] = spreading(args)
        print(table(["workers", "load", "round", "shares", "server cores", "client",
                     "other", "rps", "failed"],
                    [[r["workers"], r["load"], r["round"],
                      " / ".join(f"{s:.0%}" for s in r["worker_share"]),
                      r["server_cores"], r["client_cores"], r["other_cores"], r["rps"],
                      r["errors"]]
                     for r in out["spreading"]]))
    if args.part in ("all", "threads"):
        print("-- threads: cores used by one worker (examples.similarity, BLAS 1 thread)",
              flush=True)
        out["threads"] = threads(args)
    out["load_average_end"] = os.getloadavg()[0]
    path = write_results("workers", out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
