"""What every benchmark shares: processes pinned to cores, readiness, stats, reports.

Layout of one comparison: both servers run for the whole script, pinned to one core
(`taskset`); the load generator runs in its own process on the other core. Loads
alternate between the servers (A B A B ...) so drift (thermal, noisy neighbours) hits
both alike, and each round's tensorwire/bare ratio is taken before the median.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PY = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------- cores


@dataclass(frozen=True)
class Pinning:
    """Which core the servers and the load generator get (None: not pinned)."""

    server: int | None
    load: int | None

    @classmethod
    def detect(cls) -> Pinning:
        cores = sorted(os.sched_getaffinity(0))
        if shutil.which("taskset") and len(cores) >= 2:
            return cls(cores[0], cores[1])
        return cls(None, None)

    def prefix(self, role: str) -> list[str]:
        core = self.server if role == "server" else self.load
        return [] if core is None else ["taskset", "-c", str(core)]

    def cores(self) -> list[int]:
        """The cores a run uses (all of this process's when not pinned)."""
        if self.server is None:
            return sorted(os.sched_getaffinity(0))
        return [self.server, self.load]  # type: ignore[list-item]

    def describe(self) -> str:
        if self.server is None:
            return "not pinned (taskset missing or fewer than 2 cores)"
        return (f"servers pinned to CPU {self.server}, load generator to CPU {self.load} "
                "(taskset -c)")


# ---------------------------------------------------------------------- machine


def core_times() -> dict[int, tuple[float, float]]:
    """Per-core (busy, total) seconds since boot, from /proc/stat."""
    out: dict[int, tuple[float, float]] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/stat").read_text().splitlines():
            name, *vals = line.split()
            if name.startswith("cpu") and name != "cpu":
                v = [int(x) for x in vals[:8]]
                total = sum(v)
                idle = v[3] + v[4]
                out[int(name[3:])] = ((total - idle) / CLK_TCK, total / CLK_TCK)
    return out


def busy_share(before: dict, after: dict, core: int) -> float:
    """Fraction of `core` busy between two `core_times()` readings."""
    if core not in before or core not in after:
        return float("nan")
    busy = after[core][0] - before[core][0]
    total = after[core][1] - before[core][1]
    return busy / total if total > 0 else float("nan")


def wait_quiet(cores: Sequence[int], threshold: float = 0.15, max_wait: float = 30.0,
               probe: float = 0.5) -> float:
    """Wait (up to max_wait s) until no core is busier than `threshold` over one probe.

    The benchmark machine may be shared; a run started while something else eats a
    core measures that something. Returns the seconds waited.
    """
    start = time.monotonic()
    while True:
        before = core_times()
        time.sleep(probe)
        after = core_times()
        busiest = max((busy_share(before, after, c) for c in cores), default=0.0)
        if busiest != busiest or busiest <= threshold:
            break
        if time.monotonic() - start > max_wait:
            break
    return time.monotonic() - start


def machine_info() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str] = {"python": platform.python_version()}
    for dist in ("tensorwire", "aiohttp", "grpcio", "protobuf", "pydantic", "pydantic-core",
                 "orjson", "numpy"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            versions[dist] = version(dist)
    wrk = shutil.which("wrk")
    if wrk:
        out = subprocess.run([wrk, "--version"], capture_output=True, text=True)
        versions["wrk"] = (out.stdout + out.stderr).split("[")[0].strip()
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "versions": versions,
        "time": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


# ---------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    """A server subprocess (its own session, so it can be stopped as a group)."""

    name: str
    cmd: list[str]
    env: dict[str, str] = field(default_factory=dict)
    popen: subprocess.Popen | None = None
    log: Path | None = None

    def start(self) -> Proc:
        fd, path = tempfile.mkstemp(prefix=f"bench-{self.name}-", suffix=".log")
        self.log = Path(path)
        self.popen = subprocess.Popen(
            self.cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **self.env},
            stdout=fd, stderr=subprocess.STDOUT, start_new_session=True)
        os.close(fd)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU of the process (all its threads) so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log else ""

    def stop(self) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        if self.log:
            with contextlib.suppress(OSError):
                self.log.unlink()


@contextlib.contextmanager
def running(procs: Sequence[Proc], ready: Callable[[Proc], None]) -> Iterator[None]:
    try:
        for p in procs:
            p.start()
        for p in procs:
            try:
                ready(p)
            except Exception as exc:
                raise RuntimeError(f"{p.name} did not start: {exc}\n{p.logs()[-3000:]}") \
                    from None
        yield
    finally:
        for p in procs:
            p.stop()


def http_ready(url: str, proc: Proc | None = None, timeout: float = 60.0,
               interval: float = 0.02) -> float:
    """Poll GET url until 200; returns the monotonic time it first answered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return time.monotonic()
        except OSError:
            pass
        time.sleep(interval)
    raise TimeoutError(f"{url} not ready after {timeout} s")


def grpc_serving(target: str, proc: Proc | None = None, timeout: float = 60.0,
                 interval: float = 0.02, service: str = "") -> float:
    """Poll grpc.health.v1 Check until SERVING; returns the monotonic time it did."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + timeout
    # gRPC backs off ~1 s after a refused connect: without these options the poll would
    # measure the channel's back-off, not the server's start-up.
    options = [("grpc.initial_reconnect_backoff_ms", int(interval * 1000) or 1),
               ("grpc.min_reconnect_backoff_ms", int(interval * 1000) or 1),
               ("grpc.max_reconnect_backoff_ms", 100)]
    with grpc.insecure_channel(target, options=options) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if proc is not None and not proc.alive():
                raise RuntimeError(f"{proc.name} exited")
            try:
                reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return time.monotonic()
            except grpc.RpcError:
                pass
            time.sleep(interval)
    raise TimeoutError(f"{target} not SERVING after {timeout} s")


def run_load(cmd: list[str], on_warm: Callable[[], None] | None = None,
             timeout: float = 600) -> dict[str, Any]:
    """Run a load client; it prints `WARM` when warm-up ends and one JSON line last."""
    import resource

    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    result: dict[str, Any] | None = None
    for line in proc.stdout:
        line = line.strip()
        if line == "WARM":
            if on_warm:
                on_warm()
        elif line.startswith("{"):
            result = json.loads(line)
    proc.wait(timeout)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0 or result is None:
        raise RuntimeError(f"load client failed ({proc.returncode}): {' '.join(cmd)}\n{err}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    #: CPU seconds of the whole client process (warm-up included).
    result["client_cpu_s"] = (children.ru_utime - children0.ru_utime
                              + children.ru_stime - children0.ru_stime)
    return result


# ---------------------------------------------------------------------- failed calls
#
# A server that drops or refuses some calls can look fast: the calls it failed cost it
# little, and a count of successes alone hides them (bench/real_model.py once printed
# "met" while 12-18 % of its gRPC calls failed). So every load client counts each failed
# call by kind, every table prints failures beside requests/s, and a target is met only
# when its figure holds *and* no call failed.


class Failures:
    """The failed calls of one load run, by kind, and the first one's message.

    Kinds read like `status 503`, `rpc UNAVAILABLE`, `exception TimeoutError`,
    `short stream (3 of 64 chunks)` is filed as `short stream`, `error event`.
    """

    def __init__(self) -> None:
        self.kinds: dict[str, int] = {}
        self.first: str | None = None

    def add(self, kind: str, message: str = "", count: int = 1) -> None:
        if count <= 0:
            return
        self.kinds[kind] = self.kinds.get(kind, 0) + count
        if self.first is None:
            self.first = f"{kind}: {message}"[:300] if message else kind

    def exception(self, exc: BaseException) -> None:
        """A call that raised: an RPC error is filed under its status code, anything
        else (connection reset, client timeout, a bad answer) under its type."""
        try:
            code = exc.code().name  # type: ignore[attr-defined]  # grpc.RpcError
            details = exc.details() or ""  # type: ignore[attr-defined]
        except Exception:
            self.add(f"exception {type(exc).__name__}", str(exc))
        else:
            self.add(f"rpc {code}", str(details))

    @property
    def total(self) -> int:
        return sum(self.kinds.values())

    def merge(self, other: Failures) -> None:
        for kind, n in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n
        if self.first is None:
            self.first = other.first

    def report(self, warmup: Failures | None = None) -> dict[str, Any]:
        """The fields a load client's JSON line carries: `errors` counts every failed
        call, the warm-up's included (`warmup_errors` of them); `error_kinds` says what."""
        total = Failures()
        if warmup is not None:
            total.merge(warmup)
        total.merge(self)
        return {"errors": total.total, "warmup_errors": warmup.total if warmup else 0,
                "error_kinds": total.kinds, "first_error": total.first}


def failed_calls(*results: dict[str, Any]) -> int:
    """Failed calls of load results (missing counts, from older result files, are 0)."""
    return sum(int(r.get("errors", 0) or 0) for r in results)


def target_met(condition: bool, failed: int) -> bool:
    """A target holds only when its figure does and not one call failed."""
    return bool(condition) and failed == 0


def verdict(met: bool, failed: int = 0, missed: str = "MISSED") -> str:
    """How a target reads: `met`, `MISSED`, or `MISSED (N failed calls)`."""
    if failed:
        return f"{missed} ({failed} failed call{'' if failed == 1 else 's'})"
    return "met" if met else missed


def rps_and_failures(rps: float, failed: int) -> str:
    """Requests/s with its failed calls beside it, as every progress line prints them."""
    return f"rps={rps:>9.1f} failed={failed:<4d}"


def wrk_result(raw: dict[str, Any], warmup: dict[str, Any] | None = None) -> dict[str, Any]:
    """A wrk run (the JSON line of bench/support/load/post*.lua) in the load clients' format.

    wrk counts every answered request in `requests`, error statuses (>= 400) included;
    those, socket errors (connect, read, write) and timeouts (calls slower than wrk's 2 s,
    counted even if they answer later) are failed calls. Requests/s counts the others;
    wrk's latency percentiles cannot tell them apart and include failed answers.
    """
    elapsed = raw["duration_us"] / 1e6
    failures = Failures()
    for source in (warmup, raw):
        for kind, n in (source or {}).get("errors", {}).items():
            failures.add(f"wrk {kind}", count=n)
    ok = max(0, raw["requests"] - raw["errors"]["status"])
    out = {"requests": ok, "elapsed_s": elapsed, "rps": ok / elapsed,
           "p50_ms": raw["p50_us"] / 1e3, "p90_ms": raw.get("p90_us", float("nan")) / 1e3,
           "p99_ms": raw["p99_us"] / 1e3, "max_ms": raw.get("max_us", float("nan")) / 1e3,
           "client_cpu_s": raw.get("client_cpu_s", float("nan"))}
    out.update(failures.report())
    out["warmup_errors"] = sum(warmup["errors"].values()) if warmup else 0
    return out


# ---------------------------------------------------------------------- stats


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted samples (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


def median(values: Sequence[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


@dataclass
class Comparison:
    """Rounds of (A, B) measurements of one case, and their median A/B ratios.

    A is tensorwire and B the bare baseline unless `names` says otherwise.
    """

    case: dict[str, Any]
    names: tuple[str, ...] = ("tensorwire", "bare")
    rounds: list[dict[str, dict[str, Any]]] = field(default_factory=list)

    def add(self, server: str, result: dict[str, Any]) -> None:
        if not self.rounds or server in self.rounds[-1]:
            self.rounds.append({})
        self.rounds[-1][server] = result

    def summary(self, metrics: Sequence[str]) -> dict[str, Any]:
        """Medians of A and B and of A/B per round; each further name (an extra
        baseline, such as bare aiohttp on another loop) under `extra`, with A/it."""
        a, b, *others = self.names
        out: dict[str, Any] = dict(self.case)
        complete = [r for r in self.rounds if all(n in r for n in self.names)]

        def medians(side: str) -> dict[str, Any]:
            got = {m: median([r[side][m] for r in complete]) for m in metrics
                   if all(m in r[side] for r in complete)}
            got["errors"] = sum(r[side].get("errors", 0) for r in complete)
            return got

        def ratios(other: str) -> dict[str, float]:
            return {m: median([r[a][m] / r[other][m] for r in complete if r[other].get(m)])
                    for m in metrics if all(m in r[other] and m in r[a] for r in complete)}

        out[a], out[b] = medians(a), medians(b)
        out["ratio"] = ratios(b)
        if others:
            out["extra"] = {o: {**medians(o), "ratio": ratios(o)} for o in others}
        out["rounds"] = len(complete)
        return out


# ---------------------------------------------------------------------- reports


def fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        if value != value:
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join([line, sep, *body])


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


def header(title: str, pinning: Pinning, load: str) -> str:
    info = machine_info()
    v = info["versions"]
    return (f"== {title}\n"
            f"machine: {info['cpu']}, {info['cores']} cores; {pinning.describe()}\n"
            f"load: {load}\n"
            f"python {v['python']}, aiohttp {v.get('aiohttp')}, grpcio {v.get('grpcio')}, "
            f"protobuf {v.get('protobuf')}, pydantic {v.get('pydantic')}")
