"""perf_analyzer, Triton's own load tool, unmodified against tensorwire and MLServer 1.7.

    .venv/bin/python bench/perf_analyzer.py            # full run (~8 min + installs)
    .venv/bin/python bench/perf_analyzer.py --quick    # shorter windows

The model is the one bench/open_inference.py serves: `echo`, a float32 tensor back as
`result` (tensorwire `bench.support.oip_service:OipBench`, MLServer a custom `MLModel` through
`NumpyCodec`, both from that script). perf_analyzer sends `x` of 16 floats (64 B) and
of 262,144 floats (1 MiB) over HTTP (binary tensors, its default) and gRPC (raw
contents), at concurrency 1 and 8, and reports throughput and latency; with tensorwire
it also prints the server side (queue, compute input / infer / output) from the
statistics extension. The tensors are zeros (`--input-data zero`): with perf_analyzer's
default random bytes MLServer fails its gRPC answers ("required argument is not a
float"). Over HTTP MLServer cannot take part: perf_analyzer always sends Triton's binary
tensor extension, which MLServer 1.7 does not read (its rows say so).

perf_analyzer asks for the model configuration first and for the statistics around
every window: MLServer has neither, so it is measured behind `bench/support/perf_analyzer_shim.py`
(answers both, passes everything else through). tensorwire runs both directly and behind
the same shim, so the shim's own cost shows: compare MLServer with `tensorwire (shim)`.

What it installs (once, git-ignored, under bench/results/): perf_analyzer from the
`tritonclient==2.34.0` wheel (`pip install perf-analyzer` is a placeholder; newer
tritonclient wheels no longer carry the binary), the CUDA runtime library it links
(`nvidia-cuda-runtime-cu12`: loaded, never used without a GPU) into
`bench/results/perf-analyzer/`, and MLServer into `bench/results/mlserver-venv`. It also
needs Debian's `libb64-0d` (`apt-get install libb64-0d`): the script says so if it is
missing. Servers are pinned to one core and perf_analyzer to the other, on a 2-core
machine that other work shares: the numbers are noisy (±10-20 % run to run), compare
rows of one run. Writes bench/results/perf_analyzer.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.http_json import tensorwire_cmd
from bench.open_inference import (
    LIMIT,
    MODEL,
    MODEL_DIR,
    TreeProc,
    ensure_mlserver,
    grpc_ready,
    mlserver_version,
    write_mlserver_model,
)
from bench.support.common import (
    PY,
    RESULTS,
    ROOT,
    Pinning,
    Proc,
    free_port,
    header,
    http_ready,
    machine_info,
    running,
    table,
    write_results,
)

TRITONCLIENT = "tritonclient==2.34.0"
CUDART = "nvidia-cuda-runtime-cu12==12.1.105"
TOOL_DIR = RESULTS / "perf-analyzer"
#: Input sizes: name -> floats in `x`.
SIZES = {"64 B": 16, "1 MiB": 262_144}
CONCURRENCY = "1:8:7"  # 1, then 8
#: perf_analyzer's CSV columns kept (microseconds, but for throughput).
COLUMNS = {"Concurrency": "concurrency", "Inferences/Second": "infer_per_s",
           "p50 latency": "p50_us", "p90 latency": "p90_us", "p99 latency": "p99_us",
           "Server Queue": "server_queue_us", "Server Compute Input": "compute_input_us",
           "Server Compute Infer": "compute_infer_us",
           "Server Compute Output": "compute_output_us"}
#: What MLServer's model metadata declares (tensorwire's comes from the signature).
TENSORS = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
           "outputs": [{"name": "result", "datatype": "FP32", "shape": [-1]}]}


# ---------------------------------------------------------------------- the tool


def ensure_perf_analyzer() -> tuple[Path, dict[str, str]]:
    """perf_analyzer's binary and the environment it runs in (its CUDA runtime's
    folder on LD_LIBRARY_PATH), fetched into bench/results/perf-analyzer on first use."""
    binary = TOOL_DIR / "bin" / "perf_analyzer"
    cudart = TOOL_DIR / "cudart"
    if not binary.exists() or not cudart.exists():
        print(f"fetching perf_analyzer ({TRITONCLIENT}) and {CUDART} into "
              f"{TOOL_DIR.relative_to(ROOT)} (git-ignored; once)", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([PY, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                            TRITONCLIENT, CUDART], check=True)
            for wheel in Path(tmp).glob("*.whl"):
                with zipfile.ZipFile(wheel) as zf:
                    for name in zf.namelist():
                        if name.endswith("/bin/perf_analyzer"):
                            binary.parent.mkdir(parents=True, exist_ok=True)
                            binary.write_bytes(zf.read(name))
                            binary.chmod(0o755)
                        elif "libcudart.so" in name:
                            cudart.mkdir(parents=True, exist_ok=True)
                            (cudart / Path(name).name).write_bytes(zf.read(name))
    env = {**os.environ, "LD_LIBRARY_PATH": str(cudart)}
    missing = [line.split()[0] for line in subprocess.run(
        ["ldd", str(binary)], capture_output=True, text=True, env=env).stdout.splitlines()
        if "not found" in line]
    if missing:
        raise SystemExit(f"perf_analyzer needs {', '.join(missing)}: on Debian or Ubuntu "
                         "`apt-get install libb64-0d`")
    return binary, env


def tool_version(binary: Path, env: dict[str, str]) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=env)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) \
        else TRITONCLIENT


def measure(binary: Path, env: dict[str, str], pin: Pinning, protocol: str, address: str,
            floats: int, quick: bool) -> dict[str, Any]:
    """One perf_analyzer run: its rows by concurrency, or why it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "pa.csv"
        count = (800 if quick else 2000) if floats < 1024 else (80 if quick else 300)
        # 50 %: the three last windows within half of their mean. Tighter, runs on this
        # shared machine seldom settle; the spread is in the table's p90 / p99.
        cmd = [*pin.prefix("load"), str(binary), "-m", MODEL, "-u", address, "-i", protocol,
               "--shape", f"x:{floats}", "--input-data", "zero",
               "--concurrency-range", CONCURRENCY,
               "--measurement-mode", "count_windows",
               "--measurement-request-count", str(count),
               "--stability-percentage", "50", "--max-trials", "20", "-f", str(report)]
        began = time.monotonic()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
        took = time.monotonic() - began
        if out.returncode != 0 or not report.exists():
            tail = (out.stdout + out.stderr).strip().splitlines()[-3:]
            return {"ok": False, "error": " / ".join(tail), "seconds": took}
        with report.open() as fh:
            rows = [{COLUMNS[k]: float(v) for k, v in row.items() if k in COLUMNS}
                    for row in csv.DictReader(fh)]
    return {"ok": True, "rows": rows, "seconds": took, "stdout": out.stdout[-4000:]}


# ---------------------------------------------------------------------- servers


def servers(pin: Pinning) -> tuple[list[Proc], dict[str, tuple[str, str]]]:
    """The processes to start, and name -> (HTTP address, gRPC address) to measure."""
    tw_http, tw_grpc = free_port(), free_port()
    tw = Proc("tensorwire", [*pin.prefix("server"), *tensorwire_cmd(), "serve",
                             "bench.support.oip_service:OipBench", "--http-port", str(tw_http),
                             "--grpc-port", str(tw_grpc), "--max-request-size", str(LIMIT),
                             "--max-response-size", str(LIMIT)])
    exe = ensure_mlserver()
    procs: list[Proc] = [tw]
    upstreams = [("tensorwire (shim)", tw_http, tw_grpc)]
    # MLServer as installed (its inference worker process, as KServe runs it) and with
    # parallel_workers 0 (inference on the main process: its fastest), as
    # bench/open_inference.py runs it
    for name, suffix, workers in (("mlserver", "-pa", None), ("mlserver-pw0", "-pa-pw0", 0)):
        ml_http, ml_grpc, ml_metrics = free_port(), free_port(), free_port()
        folder = write_mlserver_model(MODEL_DIR.with_name(MODEL_DIR.name + suffix), ml_http,
                                      ml_grpc, ml_metrics, workers)
        settings = json.loads((folder / "model-settings.json").read_text())
        (folder / "model-settings.json").write_text(json.dumps({**settings, **TENSORS}))
        procs.append(TreeProc(name, [*pin.prefix("server"), str(exe), "start", str(folder)]))
        upstreams.append((f"{name} (shim)", ml_http, ml_grpc))
    where = {"tensorwire": (f"127.0.0.1:{tw_http}", f"127.0.0.1:{tw_grpc}")}
    for name, http, grpc_ in upstreams:
        shim_http, shim_grpc = free_port(), free_port()
        procs.append(Proc(f"shim-{name.split()[0]}", [
            *pin.prefix("server"), PY, "-m", "bench.support.perf_analyzer_shim",
            "--http-upstream", f"http://127.0.0.1:{http}",
            "--grpc-upstream", f"127.0.0.1:{grpc_}",
            "--http-port", str(shim_http), "--grpc-port", str(shim_grpc)]))
        where[name] = (f"127.0.0.1:{shim_http}", f"127.0.0.1:{shim_grpc}")
    return procs, where


def ready(where: dict[str, tuple[str, str]]) -> Any:
    upstream = {"tensorwire": "tensorwire", "mlserver": "mlserver (shim)",
                "mlserver-pw0": "mlserver-pw0 (shim)",
                "shim-tensorwire": "tensorwire (shim)", "shim-mlserver": "mlserver (shim)",
                "shim-mlserver-pw0": "mlserver-pw0 (shim)"}

    def check(proc: Proc) -> None:
        http, grpc_ = where[upstream[proc.name]]
        timeout = 240 if proc.name.endswith("mlserver") else 60
        http_ready(f"http://{http}/v2/models/{MODEL}/ready", proc, timeout=timeout)
        grpc_ready(grpc_, proc)

    return check


# ---------------------------------------------------------------------- report


def report(results: dict[str, Any]) -> str:
    rows = []
    for case, by_server in results.items():
        for server, result in by_server.items():
            if not result["ok"]:
                rows.append([case, server, "-", "failed", "", "", "", result["error"][-70:]])
                continue
            for row in result["rows"]:
                side = ""
                if server == "tensorwire":
                    side = (f"q {row.get('server_queue_us', 0):.0f} + in "
                            f"{row.get('compute_input_us', 0):.0f} + infer "
                            f"{row.get('compute_infer_us', 0):.0f} + out "
                            f"{row.get('compute_output_us', 0):.0f}")
                rows.append([case, server, int(row["concurrency"]), row["infer_per_s"],
                             row["p50_us"], row["p90_us"], row["p99_us"], side])
    return table(["case", "server", "conc.", "infer/s", "p50 us", "p90 us", "p99 us",
                  "server side us (tensorwire)"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter measurement windows")
    args = parser.parse_args()
    if not shutil.which("ldd"):
        raise SystemExit("needs ldd (glibc) to check perf_analyzer's libraries")
    binary, env = ensure_perf_analyzer()
    pin = Pinning.detect()
    procs, where = servers(pin)
    results: dict[str, dict[str, Any]] = {}
    print(header("perf_analyzer: tensorwire vs MLServer (v2 echo model)", pin,
                 f"perf_analyzer {TRITONCLIENT}, concurrency 1 and 8, count windows"),
          flush=True)
    with running(procs, ready(where)):
        for protocol in ("http", "grpc"):
            for size, floats in SIZES.items():
                case = f"{protocol} {size}"
                results[case] = {}
                for name, (http, grpc_) in where.items():
                    address = http if protocol == "http" else grpc_
                    result = measure(binary, env, pin, protocol, address, floats, args.quick)
                    results[case][name] = result
                    best = max((r["infer_per_s"] for r in result.get("rows", [])), default=0)
                    said = (f"{best:.0f} infer/s" if result["ok"]
                            else f"FAILED: {result['error']}")
                    print(f"  {case:12} {name:18} {said} ({result['seconds']:.0f} s)",
                          flush=True)
    text = report(results)
    print(text)
    path = write_results("perf_analyzer", {
        "name": "perf_analyzer", "machine": machine_info(),
        "config": {"tool": TRITONCLIENT, "mlserver": mlserver_version(),
                   "concurrency": CONCURRENCY, "sizes": SIZES, "quick": args.quick,
                   "pinning": pin.describe()},
        "results": {case: {server: {k: v for k, v in r.items() if k != "stdout"}
                           for server, r in by_server.items()}
                    for case, by_server in results.items()},
        "table": text})
    print(f"results: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
