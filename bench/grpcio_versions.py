"""Per-call cost of a bare grpcio server across grpcio releases (the regression bisect).

    .venv/bin/python bench/grpcio_versions.py --venvs /tmp/grpcio-bisect \\
        --versions 1.74.0,1.75.1,1.76.0,1.78.2,1.80.1,1.81.2,1.82.3,1.83.2,1.84.2,1.85.3

Each version runs from its own scratch virtual environment (`<venvs>/v<version>`, made
with `python -m venv` and `pip install grpcio==<version> uvloop`); `--make` creates the
missing ones. The server is the smallest grpcio server there is: one generic unary
method that answers a fixed 18-byte message (no protobuf, so any grpcio release runs
it), on grpc.aio (`--server aio`, asyncio or uvloop) or on grpcio's sync server with a
thread pool (`--server sync`). The load is this environment's grpc.aio client (the same
release for every server): `--requests` unary calls, `--connections` at a time on one
channel, after `--warmup` uncounted ones. `--server aio,sync --loop asyncio,uvloop`
measures every combination of each release (the sync server has no event loop).

`--mode callgrind` (default) counts the server's user-space instructions per call under
`valgrind --tool=callgrind`, counting switched on only around the measured calls: the
figure repeats to about 0.5 % between runs on a shared machine, where wall-clock and
CPU-time figures move by 10 % or more. System calls are not in it; `--mode cpu` reads
the server's user+system CPU seconds from /proc instead (no valgrind), several rounds
alternating between versions; `--keep DIR` keeps callgrind's dumps for
`callgrind_annotate`. Writes bench/results/grpcio_versions_MODE_SERVER_LOOP.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import (
    CLK_TCK,
    ROOT,
    free_port,
    machine_info,
    median,
    table,
    write_results,
)

METHOD = "/bench.Echo/Echo"
#: The request and the answer: the size of bench/grpc_unary.py's small messages.
REQUEST = b"\x0d\xcd\xcc\xa3\x40\x15\x00\x00\x60\x40\x1d\x33\x33\xb3\x3f\x25\xcd\xcc"
ANSWER = b"\x0a\x06setosa\x15\x00\x00\x80\x3f"

SERVER = r'''
import asyncio, sys
from concurrent.futures import ThreadPoolExecutor
import grpc
kind, loop, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
ANSWER = bytes.fromhex(sys.argv[4])

def handler(method):
    if kind == "sync":
        return grpc.unary_unary_rpc_method_handler(lambda request, context: ANSWER)
    async def echo(request, context):
        return ANSWER
    return grpc.unary_unary_rpc_method_handler(echo)

handlers = grpc.method_handlers_generic_handler("bench.Echo", {"Echo": handler("Echo")})
if kind == "sync":
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handlers,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("READY", flush=True)
    server.wait_for_termination()
else:
    async def main():
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((handlers,))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("READY", flush=True)
        await server.wait_for_termination()
    if loop == "uvloop":
        import uvloop
        uvloop.run(main())
    else:
        asyncio.run(main())
'''


def make_venv(venvs: Path, version: str) -> Path:
    """The scratch environment of one grpcio release (made when missing)."""
    path = venvs / f"v{version}"
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", f"grpcio=={version}",
                        "uvloop"], check=True)
    return python


def send(port: int, requests: int, connections: int) -> None:
    """Exactly `requests` calls, `connections` at a time on one channel; each answer
    checked."""
    import grpc

    async def run() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(METHOD)

            async def worker(n: int) -> None:
                for _ in range(n):
                    if await call(REQUEST, timeout=60) != ANSWER:
                        raise RuntimeError("the server answered something else")

            await asyncio.gather(*(worker(requests // connections)
                                   for _ in range(connections)))

    asyncio.run(run())


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited before it was ready")
        try:
            send(port, 1, 1)
            return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("the server did not become ready")


@dataclass(frozen=True)
class Config:
    """One server to measure: a grpcio release, its server kind and event loop."""

    version: str
    python: Path
    server: str
    loop: str

    @property
    def name(self) -> str:
        return f"{self.version} {self.server}/{self.loop}"

    def cmd(self, port: int) -> list[str]:
        return [str(self.python), "-c", SERVER, self.server, self.loop, str(port),
                ANSWER.hex()]


def count(config: Config, args: argparse.Namespace) -> float:
    """Instructions per call of one server under callgrind."""
    port = free_port()
    out = Path(tempfile.mkdtemp(prefix="grpcio-instr-")) / "callgrind.out"
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--callgrind-out-file={out}", *config.cmd(port)],
                            env={**os.environ, "PYTHONHASHSEED": "0"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        send(port, args.warmup, args.connections)
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)
        send(port, args.requests, args.connections)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True,
                       capture_output=True)
    finally:
        proc.terminate()
        proc.wait(60)
    dumps = sorted(out.parent.glob("callgrind.out*"))
    total = 0
    for dump in dumps:  # one file per thread with --separate-threads; one otherwise
        for line in dump.read_text().splitlines():
            if line.startswith("totals:"):
                total += int(line.split()[1])
    if args.keep is not None:  # for callgrind_annotate: where the instructions went
        args.keep.mkdir(parents=True, exist_ok=True)
        for dump in dumps:
            shutil.copy(dump, args.keep / f"v{config.version}-{config.server}-"
                                          f"{config.loop}-{dump.name}")
    shutil.rmtree(out.parent, ignore_errors=True)
    return total / args.requests


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_per_call(config: Config, args: argparse.Namespace) -> float:
    """Server CPU microseconds (user + system) per call, one load run."""
    port = free_port()
    proc = subprocess.Popen(config.cmd(port), stdout=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        send(port, args.warmup, args.connections)
        before = cpu_seconds(proc.pid)
        send(port, args.requests, args.connections)
        return (cpu_seconds(proc.pid) - before) / args.requests * 1e6
    finally:
        proc.terminate()
        proc.wait(60)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--venvs", type=Path, default=Path("/tmp/grpcio-bisect"))
    p.add_argument("--versions", default="1.74.0,1.85.3")
    p.add_argument("--make", action="store_true", help="create missing environments")
    p.add_argument("--server", default="aio",
                   help="aio, sync or both (aio,sync): grpc.aio or the thread-pool server")
    p.add_argument("--loop", default="asyncio",
                   help="asyncio, uvloop or both, for grpc.aio (the sync server has none)")
    p.add_argument("--mode", choices=("callgrind", "cpu"), default="callgrind")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3, help="cpu mode: rounds per server")
    p.add_argument("--keep", type=Path, default=None,
                   help="callgrind mode: copy each server's dump into this directory")
    args = p.parse_args()
    versions = [v for v in args.versions.split(",") if v]
    servers = [s for s in args.server.split(",") if s]
    loops = [lp for lp in args.loop.split(",") if lp]
    configs = []
    for v in versions:
        python = (make_venv(args.venvs, v) if args.make
                  else args.venvs / f"v{v}" / "bin" / "python")
        if not python.exists():
            raise SystemExit(f"no environment for grpcio {v} (run with --make)")
        for server in servers:
            for loop in (loops if server == "aio" else ["-"]):
                configs.append(Config(v, python, server, loop))
    rows: dict[str, Any] = {}
    if args.mode == "callgrind":
        if shutil.which("valgrind") is None:
            raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
        for c in configs:
            rows[c.name] = {"instructions_per_call": count(c, args)}
            print(f"  grpcio {c.name:22} {rows[c.name]['instructions_per_call']:>10,.0f} "
                  "instructions/call", flush=True)
        unit = "instructions_per_call"
    else:
        samples: dict[str, list[float]] = {c.name: [] for c in configs}
        for _ in range(args.rounds):  # alternate: drift hits every server alike
            for c in configs:
                samples[c.name].append(cpu_per_call(c, args))
        for c in configs:
            rows[c.name] = {"cpu_us_per_call": median(samples[c.name]),
                            "samples": samples[c.name]}
            print(f"  grpcio {c.name:22} {rows[c.name]['cpu_us_per_call']:>8.1f} us/call "
                  f"{[round(x, 1) for x in samples[c.name]]}", flush=True)
        unit = "cpu_us_per_call"
    first = rows[configs[0].name][unit]
    print(table(["server", unit, f"x {configs[0].name}"],
                [[k, f"{r[unit]:,.1f}", f"{r[unit] / first:.3f}"] for k, r in rows.items()]))
    name = (f"grpcio_versions_{args.mode}_{'-'.join(servers)}_{'-'.join(loops)}"
            f"{'' if args.connections == 16 else f'_c{args.connections}'}")
    path = write_results(name, {"name": name, "machine": machine_info(),
                                "config": {k: str(v) for k, v in vars(args).items()},
                                "results": rows})
    print(f"results: {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
