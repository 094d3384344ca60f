"""Instructions per request of the running server, counted by valgrind: tensorwire vs bare.

    .venv/bin/python bench/instructions.py [--requests 3200] [--connections 16]
    .venv/bin/python bench/instructions.py --api tokens --requests 400   # SSE streams

Wall-clock figures on a shared 2-core machine move by ±10 % from run to run, too much
to see a 2 % trim. This serves each server under `valgrind --tool=callgrind` with
counting off, warms it, turns counting on (`callgrind_control -i on`) for exactly
`--requests` small JSON POSTs over `--connections` kept-alive connections, and divides
the instructions the server ran by the requests. The figure repeats to about 0.1 %
between runs, so a change to the hot path is measured by one run before and one after.

It counts user-space instructions only: system calls (the same per request for both
servers, checked with `strace -c`) and cache misses are not in it, so a ratio here is
a floor of the CPU-time ratio `http_json.py` measures. Needs valgrind (`apt-get install
-y valgrind`); each server takes ~20 s. `--api tokens` counts a server-sent-event
stream of 64 short chunks per request instead (the `tokens` API of both servers), so a
per-chunk trim shows as instructions per chunk. Writes bench/results/instructions.json
(`instructions_tokens.json` for streams).
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
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import PY, ROOT, free_port, machine_info, table, write_results
from bench.model import BODY


def command(name: str, port: int) -> list[str]:
    if name == "tensorwire":
        return [PY, "-m", "tensorwire", "serve", "bench.services:Bench",
                "--http-port", str(port), "--no-grpc", "--loop", "asyncio"]
    return [PY, "-m", "bench.baselines.bare_http", "--port", str(port)]


#: What each API is sent, and how many chunks (SSE events) one answer holds.
APIS = {"predict": (BODY, 1), "tokens": (b'{"n": 64}', 64)}


async def _connection(port: int, path: str, n: int, body: bytes) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    try:
        for _ in range(n):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"the server answered {head!r}")
            if b"transfer-encoding: chunked" in head.lower():  # a stream: to its last chunk
                await reader.readuntil(b"\r\n0\r\n\r\n")
                continue
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
    finally:
        writer.close()


def send(port: int, path: str, requests: int, connections: int, body: bytes = BODY) -> None:
    """Exactly `requests` POSTs, spread over `connections` kept-alive connections."""
    async def run() -> None:
        await asyncio.gather(*(_connection(port, path, requests // connections, body)
                               for _ in range(connections)))

    asyncio.run(run())


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited before it was ready")
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=BODY,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10):
                return
        except OSError:
            time.sleep(1)
    raise RuntimeError("the server did not become ready")


def count(cmd: list[str], port: int, args: argparse.Namespace) -> dict[str, Any]:
    """Instructions per request of one server under callgrind."""
    out = Path(tempfile.mkdtemp(prefix="tensorwire-instr-")) / "callgrind.out"
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--callgrind-out-file={out}", *cmd], cwd=ROOT,
                            env={**os.environ, "PYTHONHASHSEED": "0"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_ready(port, proc)
        body, _ = APIS[args.api]
        path = f"/{args.api}"
        send(port, path, args.warmup, args.connections, body)
        control = ["callgrind_control"]
        subprocess.run([*control, "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)
        send(port, path, args.requests, args.connections, body)
        subprocess.run([*control, "-d", str(proc.pid)], check=True, capture_output=True)
        subprocess.run([*control, "-i", "off", str(proc.pid)], check=True,
                       capture_output=True)
    finally:
        proc.terminate()
        proc.wait(30)
    dump = Path(f"{out}.1")
    totals = [line for line in dump.read_text().splitlines() if line.startswith("totals:")]
    instructions = int(totals[0].split()[1])
    shutil.rmtree(out.parent, ignore_errors=True)
    return {"instructions": instructions, "per_request": instructions / args.requests,
            "per_chunk": instructions / args.requests / APIS[args.api][1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=3200, help="requests counted")
    p.add_argument("--warmup", type=int, default=400, help="requests before counting")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--api", choices=sorted(APIS), default="predict",
                   help="predict: small JSON; tokens: an SSE stream of 64 chunks")
    args = p.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    rows = {}
    for name in ("tensorwire", "bare"):
        port = free_port()
        rows[name] = count(command(name, port), port, args)
        print(f"  {name:10} {rows[name]['per_request']:>10,.0f} instructions/request",
              flush=True)
    ratio = rows["tensorwire"]["per_request"] / rows["bare"]["per_request"]
    print(table(["server", "instructions/request", "instructions/chunk"],
                [[name, f"{r['per_request']:,.0f}", f"{r['per_chunk']:,.0f}"]
                 for name, r in rows.items()]))
    what = "small JSON" if args.api == "predict" else "SSE streams of 64 chunks"
    print(f"tensorwire / bare: {ratio:.3f} (user-space instructions, {what} over HTTP, "
          f"{args.connections} connections)")
    name = "instructions" if args.api == "predict" else f"instructions_{args.api}"
    path = write_results(name, {"name": name, "machine": machine_info(),
                                "config": vars(args), "summary": rows, "ratio": ratio})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
