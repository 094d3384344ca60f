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

`--wire` counts tensorwire on its other request paths (a server per wire, the load
sent from this process): `grpc` (the same small request as a native gRPC call, and to
the bare grpc.aio servicer `bench.support.baselines.bare_grpc` on the same loop: the ratio),
`v2-grpc` (a 1x4 float32 `ModelInfer` with raw contents, as tritonclient sends it) and
`v2-http` (the same infer with Triton's binary tensor extension). `--loop` picks the
server's event loop. These are the before/after figures of a change to a transport:

    .venv/bin/python bench/instructions.py --wire grpc --loop uvloop --requests 2000
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

from bench.support.common import PY, ROOT, free_port, machine_info, table, write_results
from bench.support.model import BODY


def command(name: str, port: int, loop: str = "asyncio") -> list[str]:
    if name == "tensorwire":
        return [PY, "-m", "tensorwire", "serve", "bench.support.services:Bench",
                "--http-port", str(port), "--no-grpc", "--loop", loop]
    return [PY, "-m", "bench.support.baselines.bare_http", "--port", str(port)]


def wire_command(wire: str, http_port: int, grpc_port: int, loop: str) -> list[str]:
    """tensorwire serving the service a `--wire` run calls (both ports open)."""
    service = ("bench.support.services:Bench" if wire == "grpc"
               else "bench.support.oip_service:OipBench")
    return [PY, "-m", "tensorwire", "serve", service, "--http-port", str(http_port),
            "--grpc-port", str(grpc_port), "--loop", loop]


def _v2_http_body() -> tuple[bytes, int]:
    """A 1x4 float32 infer in Triton's binary extension, and its JSON header's length."""
    import json

    import numpy as np

    header = json.dumps({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 16}}],
                         "outputs": [{"name": "result",
                                      "parameters": {"binary_data": True}}]}).encode()
    return header + np.arange(4, dtype=np.float32).tobytes(), len(header)


def _grpc_request(wire: str) -> tuple[str, bytes]:
    """(rpc path, serialised request) of a `--wire grpc` / `v2-grpc` call."""
    import numpy as np

    import tensorwire
    from tensorwire import inference as pb
    from tensorwire.protobuf.descriptors import service_proto

    if wire == "grpc":
        from bench.support.model import FEATURES
        from bench.support.services import Bench

        proto = service_proto(tensorwire.get_service_spec(Bench))
        values = dict(zip(FEATURES, (5.1, 3.5, 1.4, 0.2), strict=True))
        return (proto.method_names["predict"],
                proto.messages["predict"].request(values).SerializeToString())
    request = pb.ModelInferRequest(model_name="echo")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
    return "/inference.GRPCInferenceService/ModelInfer", request.SerializeToString()


def send_grpc(port: int, path: str, data: bytes, requests: int, connections: int) -> None:
    """Exactly `requests` unary calls, `connections` at a time on one channel."""
    import grpc

    async def run() -> None:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(path)

            async def worker(n: int) -> None:
                for _ in range(n):
                    await call(data, timeout=60)

            await asyncio.gather(*(worker(requests // connections)
                                   for _ in range(connections)))

    asyncio.run(run())


#: What each API is sent, and how many chunks (SSE events) one answer holds.
APIS = {"predict": (BODY, 1), "tokens": (b'{"n": 64}', 64)}


async def _connection(port: int, path: str, n: int, body: bytes, extra: str = "") -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}"
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


def send(port: int, path: str, requests: int, connections: int, body: bytes = BODY,
         extra: str = "") -> None:
    """Exactly `requests` POSTs, spread over `connections` kept-alive connections
    (`extra`: more header lines, each ending in CRLF)."""
    async def run() -> None:
        await asyncio.gather(*(_connection(port, path, requests // connections, body, extra)
                               for _ in range(connections)))

    asyncio.run(run())


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 300,
                path: str = "/predict") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited before it was ready")
        try:
            if path == "/predict":
                req = urllib.request.Request(f"http://127.0.0.1:{port}/predict", data=BODY,
                                             headers={"Content-Type": "application/json"})
            else:
                req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
            with urllib.request.urlopen(req, timeout=10):
                return
        except OSError:
            time.sleep(1)
    raise RuntimeError("the server did not become ready")


def _wait_grpc(port: int, proc: subprocess.Popen[bytes], timeout: float = 300) -> None:
    """Until the server at `port` answers gRPC health checks SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited before it was ready")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(), timeout=10)
            if reply.status == health_pb2.HealthCheckResponse.SERVING:
                return
        except grpc.RpcError:
            pass
        time.sleep(1)
    raise RuntimeError("the server did not become ready")


def count(cmd: list[str], port: int, args: argparse.Namespace,
          load: Any = None, grpc_ready: bool = False) -> dict[str, Any]:
    """Instructions per request of one server under callgrind. `load(n)` sends `n`
    requests (default: the `--api` JSON POSTs to `port`); `grpc_ready`: wait for
    `port`'s gRPC health (a server without HTTP) rather than an HTTP answer."""
    out = Path(tempfile.mkdtemp(prefix="tensorwire-instr-")) / "callgrind.out"
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--callgrind-out-file={out}", *cmd], cwd=ROOT,
                            env={**os.environ, "PYTHONHASHSEED": "0"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if grpc_ready:
            _wait_grpc(port, proc)
        else:
            _wait_ready(port, proc, path="/predict" if load is None else "/readyz")
        if load is None:
            body, _ = APIS[args.api]

            def load(n: int) -> None:
                send(port, f"/{args.api}", n, args.connections, body)

        load(args.warmup)
        control = ["callgrind_control"]
        subprocess.run([*control, "-i", "on", str(proc.pid)], check=True,
                       capture_output=True)
        load(args.requests)
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
    p.add_argument("--wire", choices=WIRES, default="http",
                   help="http: --api against bare aiohttp; the others count tensorwire "
                        "alone on that request path (see the module docstring)")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                   help="tensorwire's event loop")
    args = p.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install -y valgrind)")
    if args.wire != "http":
        count_wire(args)
        return
    rows = {}
    for name in ("tensorwire", "bare"):
        port = free_port()
        rows[name] = count(command(name, port, args.loop), port, args)
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


#: --wire choices: `http` compares with bare aiohttp; the rest count tensorwire alone.
WIRES = ("http", "grpc", "v2-grpc", "v2-http")


def count_wire(args: argparse.Namespace) -> None:
    """tensorwire's instructions per request on one of its other request paths."""
    http_port, grpc_port = free_port(), free_port()
    if args.wire == "v2-http":
        body, header_length = _v2_http_body()
        extra = f"Inference-Header-Content-Length: {header_length}\r\n"

        def load(n: int) -> None:
            send(http_port, "/v2/models/echo/infer", n, args.connections, body, extra)
    else:
        path, data = _grpc_request(args.wire)

        def load(n: int) -> None:
            send_grpc(grpc_port, path, data, n, args.connections)

    row = count(wire_command(args.wire, http_port, grpc_port, args.loop), http_port,
                args, load)
    print(f"tensorwire {args.wire} on {args.loop}: {row['per_request']:,.0f} "
          f"instructions/request")
    summary = {"tensorwire": row}
    payload: dict[str, Any] = {}
    if args.wire == "grpc":  # the same request to bare grpc.aio on the same loop
        from bench.support.baselines.stubs import compile_stubs

        port = free_port()
        stubs = compile_stubs()
        bare_path = "/bench.Bench/Predict"

        def bare_load(n: int) -> None:
            send_grpc(port, bare_path, data, n, args.connections)

        summary["bare"] = count([PY, "-m", "bench.support.baselines.bare_grpc", "--port", str(port),
                                 "--stubs", str(stubs), "--loop", args.loop], port, args,
                                bare_load, grpc_ready=True)
        payload["ratio"] = summary["tensorwire"]["per_request"] / summary["bare"]["per_request"]
        print(f"bare grpc.aio on {args.loop}: {summary['bare']['per_request']:,.0f} "
              f"instructions/request; tensorwire / bare: {payload['ratio']:.3f}")
    name = f"instructions_{args.wire}_{args.loop}"
    path = write_results(name, {"name": name, "machine": machine_info(),
                                "config": vars(args), "summary": summary, **payload})
    print(f"results: {path}")


if __name__ == "__main__":
    main()
