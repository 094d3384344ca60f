"""Start-up and memory: `tensorwire serve` of a numpy-only service vs a bare two-protocol
server, from process start to HTTP `/readyz` 200 and to gRPC health SERVING, and RSS once
ready; plus the cost of `import tensorwire` itself.

    .venv/bin/python bench/startup.py             # 7 rounds (~1 min)
    .venv/bin/python bench/startup.py --rounds 3

tensorwire: `tensorwire serve bench.support.numpy_service:NumpyIris` (one process, both
protocols). Bare: `bench.support.baselines.bare_numpy` (the same numpy model behind a bare aiohttp
app and a bare grpc.aio server with a health servicer). Rounds alternate A B A B; both
readiness probes poll at once from two threads every 10 ms. Import times are measured in
fresh interpreters (`import tensorwire` vs `import aiohttp, grpc, pydantic, numpy`).
Writes bench/results/startup.json.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.http_json import tensorwire_cmd
from bench.support.common import (
    PY,
    ROOT,
    Pinning,
    Proc,
    free_port,
    grpc_serving,
    header,
    http_ready,
    machine_info,
    median,
    table,
    write_results,
)

TARGET_READY_S = 2.0
TARGET_IMPORT_S = 0.3
IMPORTS = {"tensorwire": "import tensorwire",
           "bare": "import aiohttp, grpc, pydantic, numpy"}


def make_proc(name: str, pin: Pinning, http_port: int, grpc_port: int) -> Proc:
    if name == "tensorwire":
        cmd = [*tensorwire_cmd(), "serve", "bench.support.numpy_service:NumpyIris",
               "--http-port", str(http_port), "--grpc-port", str(grpc_port)]
    else:
        cmd = [PY, "-m", "bench.support.baselines.bare_numpy", "--http-port", str(http_port),
               "--grpc-port", str(grpc_port)]
    return Proc(name, [*pin.prefix("server"), *cmd])


def one_start(name: str, pin: Pinning) -> dict[str, Any]:
    """Start one server, time both readiness probes, read its RSS, stop it."""
    http_port, grpc_port = free_port(), free_port()
    proc = make_proc(name, pin, http_port, grpc_port)
    t0 = time.monotonic()
    proc.start()
    try:
        with ThreadPoolExecutor(2) as pool:
            http = pool.submit(http_ready, f"http://127.0.0.1:{http_port}/readyz", proc,
                               60.0, 0.01)
            grpc = pool.submit(grpc_serving, f"127.0.0.1:{grpc_port}", proc, 60.0, 0.01)
            t_http, t_grpc = http.result(), grpc.result()
        time.sleep(0.3)  # let start-up garbage settle before reading the resident set
        rss = proc.rss_bytes()
    except Exception as exc:
        raise RuntimeError(f"{name} did not start: {exc}\n{proc.logs()[-3000:]}") from None
    finally:
        proc.stop()
    return {"http_ready_s": t_http - t0, "grpc_serving_s": t_grpc - t0,
            "both_ready_s": max(t_http, t_grpc) - t0, "rss_mib": rss / 2**20}


def import_seconds(statement: str) -> float:
    """Seconds one fresh interpreter spends on `statement` (interpreter start excluded)."""
    code = ("import time; t = time.perf_counter(); " + statement
            + "; print(time.perf_counter() - t)")
    out = subprocess.run([PY, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    return float(out.stdout.strip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    pin = Pinning.detect()
    print(header("Start-up and memory: numpy-only service", pin, "readiness pollers"),
          flush=True)
    rounds: list[dict[str, dict[str, Any]]] = []
    for r in range(args.rounds):
        rounds.append({})
        for name in ("tensorwire", "bare"):
            res = one_start(name, pin)
            res["import_s"] = import_seconds(IMPORTS[name])
            rounds[-1][name] = res
            print(f"  round {r + 1}/{args.rounds} {name:10} http={res['http_ready_s']:.3f}s "
                  f"grpc={res['grpc_serving_s']:.3f}s rss={res['rss_mib']:.1f}MiB "
                  f"import={res['import_s']:.3f}s", flush=True)
    metrics = ("http_ready_s", "grpc_serving_s", "both_ready_s", "rss_mib", "import_s")
    summary = {name: {m: median([r[name][m] for r in rounds]) for m in metrics}
               for name in ("tensorwire", "bare")}
    summary["ratio"] = {m: median([r["tensorwire"][m] / r["bare"][m] for r in rounds])
                        for m in metrics}
    print()
    print(table(["", *metrics], [[n, *(summary[n][m] for m in metrics)]
                                 for n in ("tensorwire", "bare", "ratio")]))
    tw = summary["tensorwire"]
    targets = [{"case": "start-up to ready (both protocols)", "value_s": tw["both_ready_s"],
                "target_s": TARGET_READY_S, "met": tw["both_ready_s"] <= TARGET_READY_S},
               {"case": "import tensorwire", "value_s": tw["import_s"],
                "target_s": TARGET_IMPORT_S, "met": tw["import_s"] <= TARGET_IMPORT_S}]
    for t in targets:
        print(f"target {t['case']}: {t['value_s']:.3f} s (<= {t['target_s']} s: "
              f"{'met' if t['met'] else 'MISSED'})")
    path = write_results("startup", {
        "name": "startup", "machine": machine_info(), "pinning": pin.describe(),
        "config": {"rounds": args.rounds,
                   "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])},
        "summary": summary, "targets": targets, "rounds": rounds})
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
