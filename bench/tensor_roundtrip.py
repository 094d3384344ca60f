"""float32 tensor echo throughput: tensorwire gRPC / HTTP .npy / HTTP JSON vs bare baselines.

    .venv/bin/python bench/tensor_roundtrip.py [--sizes 1,16,64] [--rounds 10]

Three servers run in their own processes: tensorwire (both protocols, an echo API whose
root input and output are `Annotated[np.ndarray, DType("float32")]`), a bare grpc.aio
server echoing the request bytes, and a bare aiohttp server echoing an
application/octet-stream body. The load runs here, one request at a time, and each
tensorwire form is timed alternately with its baseline (A B A B ...) so that drift of
the machine hits both alike. A round trip counts the client's work too: the bare
clients turn the array into bytes and the reply back into an array (`tobytes`,
`frombuffer`), tensorwire's clients build and read their Tensor message / .npy / JSON.

MB/s = payload bytes (one way, 10^6 bytes per MB) / median round-trip time. A call that
fails (an error status or exception) or does not echo the tensor is a failed call: it is
counted, printed beside the MB/s and left out of the medians, and a target is met only
when no call failed. Prints a table with the ratios to the baselines and writes
bench/results/tensor_roundtrip.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import typing as t
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorwire
from bench.common import Failures, target_met, verdict
from tensorwire.validators import DType

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "tensor_roundtrip.json"
MiB = 1024 * 1024
LIMIT = 1024 * MiB
GRPC_OPTIONS = [("grpc.max_receive_message_length", LIMIT),
                ("grpc.max_send_message_length", LIMIT)]
BARE_METHOD = "/bench.Echo/Echo"


# ---------------------------------------------------------------------- servers


@tensorwire.service(name="TensorEcho")
class TensorEcho:
    @tensorwire.api
    def echo(self, x: t.Annotated[np.ndarray, DType("float32")], /
             ) -> t.Annotated[np.ndarray, DType("float32")]:
        return x


async def serve_tensorwire() -> None:
    from tensorwire.ops.serve import Server
    from tensorwire.settings import Settings

    settings = Settings(http_port=0, grpc_port=0, max_request_size=LIMIT,
                        max_response_size=LIMIT, graceful_timeout=1)
    server = Server(tensorwire.get_service_spec(TensorEcho), settings)
    bound = await server.start()
    print(f"READY {bound.http_port} {bound.grpc_port}", flush=True)
    await server.wait()


async def serve_bare_grpc() -> None:
    import grpc

    async def echo(request: bytes, context: t.Any) -> bytes:
        return request

    server = grpc.aio.server(options=GRPC_OPTIONS)
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"READY 0 {port}", flush=True)
    await server.wait_for_termination()


async def serve_bare_http() -> None:
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="application/octet-stream")

    app = web.Application(client_max_size=LIMIT)
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"READY {port} 0", flush=True)
    await asyncio.Event().wait()


SERVERS = {"tensorwire": serve_tensorwire, "grpc": serve_bare_grpc, "http": serve_bare_http}


def spawn(kind: str) -> tuple[subprocess.Popen[str], int, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY"):
        proc.kill()
        raise RuntimeError(f"{kind} server failed to start: {line!r}")
    _, http_port, grpc_port = line.split()
    return proc, int(http_port), int(grpc_port)


# ---------------------------------------------------------------------- clients


class Clients:
    """One echo call per form, each returning the array it got back."""

    def __init__(self, tw: tuple[int, int], bare_grpc: int, bare_http: int) -> None:
        import aiohttp
        import grpc

        from tensorwire.protobuf.descriptors import service_proto

        self.messages = service_proto(tensorwire.get_service_spec(TensorEcho)).messages[
            "echo"]
        self.tw_http = f"http://127.0.0.1:{tw[0]}/echo"
        self.bare_http = f"http://127.0.0.1:{bare_http}/echo"
        self.tw_channel = grpc.aio.insecure_channel(f"127.0.0.1:{tw[1]}", options=GRPC_OPTIONS)
        self.bare_channel = grpc.aio.insecure_channel(f"127.0.0.1:{bare_grpc}",
                                                      options=GRPC_OPTIONS)
        self.tw_echo = self.tw_channel.unary_unary("/tensor_echo.TensorEcho/Echo")
        self.bare_echo = self.bare_channel.unary_unary(BARE_METHOD)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1), read_bufsize=4 * MiB)

    async def close(self) -> None:
        await self.session.close()
        await self.tw_channel.close()
        await self.bare_channel.close()

    async def tensorwire_grpc(self, x: np.ndarray) -> np.ndarray:
        m = self.messages  # the client side of the same contract: tensorwire.protobuf
        return m.parse_response(await self.tw_echo(m.request_bytes({"x": x})))

    async def bare_grpc(self, x: np.ndarray) -> np.ndarray:
        return np.frombuffer(await self.bare_echo(x.tobytes()), np.float32)

    async def tensorwire_npy(self, x: np.ndarray) -> np.ndarray:
        from tensorwire.wire import npy

        headers = {"Content-Type": npy.NPY, "Accept": npy.NPY}
        async with self.session.post(self.tw_http, data=npy.write(x), headers=headers) as r:
            return npy.read(await answer(r))

    async def tensorwire_json(self, x: np.ndarray) -> np.ndarray:
        import orjson

        body = orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY)
        headers = {"Content-Type": "application/json"}
        async with self.session.post(self.tw_http, data=body, headers=headers) as r:
            return np.array(orjson.loads(await answer(r)), np.float32)

    async def bare_http_echo(self, x: np.ndarray) -> np.ndarray:
        headers = {"Content-Type": "application/octet-stream"}
        async with self.session.post(self.bare_http, data=x.tobytes(), headers=headers) as r:
            return np.frombuffer(await answer(r), np.float32)


async def answer(response: t.Any) -> bytes:
    """The body of a 2xx answer; another status is a failed call."""
    body = await response.read()
    if not 200 <= response.status < 300:
        raise RuntimeError(f"status {response.status}: {body[:200]!r}")
    return body


async def timed(call: t.Callable[[np.ndarray], t.Awaitable[np.ndarray]], x: np.ndarray,
                failures: Failures) -> float | None:
    """Seconds of one round trip, or None (counted in `failures`) when the call failed
    or did not echo the tensor."""
    start = time.perf_counter()
    try:
        out = await call(x)
    except Exception as exc:
        failures.exception(exc)
        return None
    elapsed = time.perf_counter() - start
    if out.size != x.size or not np.array_equal(out.reshape(-1), x.reshape(-1)):
        failures.add("wrong answer", f"{call.__name__} did not echo the tensor")
        return None
    return elapsed


async def measure(clients: Clients, sizes: list[int], rounds: int, json_rounds: int
                  ) -> dict[str, t.Any]:
    pairs = [("tensorwire_grpc", clients.tensorwire_grpc, "bare_grpc", clients.bare_grpc),
             ("tensorwire_npy", clients.tensorwire_npy, "bare_http", clients.bare_http_echo)]
    results: dict[str, t.Any] = {}
    rng = np.random.default_rng(0)
    for mib in sizes:
        x = rng.standard_normal(mib * MiB // 4, dtype=np.float32)
        samples: dict[str, list[float | None]] = {}
        failures: dict[str, Failures] = {}
        for a, call_a, b, call_b in pairs:  # warm-up (its failures count too)
            await timed(call_a, x, failures.setdefault(a, Failures()))
            await timed(call_b, x, failures.setdefault(b, Failures()))
        n = max(3, rounds if mib < 64 else rounds // 2)
        json_n = max(1, json_rounds if mib == 1 else json_rounds // 3)
        order = [*(pair for _ in range(n) for a, call_a, b, call_b in pairs
                   for pair in ((a, call_a), (b, call_b))),
                 *(pair for _ in range(json_n)
                   for pair in (("tensorwire_json", clients.tensorwire_json),
                                ("bare_http_json_pair", clients.bare_http_echo)))]
        for name, call in order:
            samples.setdefault(name, []).append(
                await timed(call, x, failures.setdefault(name, Failures())))
        row = {}
        for name, values in samples.items():
            ok = [v for v in values if v is not None]
            median = statistics.median(ok) if ok else float("nan")
            row[name] = {"median_ms": median * 1e3, "mb_per_s": x.nbytes / median / 1e6,
                         "samples": len(ok), **failures[name].report()}
        row["ratio_grpc"] = row["tensorwire_grpc"]["mb_per_s"] / row["bare_grpc"]["mb_per_s"]
        row["ratio_npy"] = row["tensorwire_npy"]["mb_per_s"] / row["bare_http"]["mb_per_s"]
        row["ratio_json"] = (row["tensorwire_json"]["mb_per_s"]
                             / row["bare_http_json_pair"]["mb_per_s"])
        results[f"{mib}MiB"] = row
        print_row(mib, row)
    return results


def print_header() -> None:
    print(f"{'size':>6} {'tw gRPC':>9} {'bare gRPC':>9} {'ratio':>6}   {'tw npy':>9} "
          f"{'bare HTTP':>9} {'ratio':>6}   {'tw JSON':>9} {'ratio':>7}   {'failed':>6}   "
          "(MB/s; failed: calls of the size's row, warm-up included)")


def print_row(mib: int, row: dict[str, t.Any]) -> None:
    def mbs(name: str) -> str:
        return f"{row[name]['mb_per_s']:9.1f}"

    failed = sum(v["errors"] for v in row.values() if isinstance(v, dict))
    print(f"{mib:>4}Mi {mbs('tensorwire_grpc')} {mbs('bare_grpc')} {row['ratio_grpc']:6.2f}   "
          f"{mbs('tensorwire_npy')} {mbs('bare_http')} {row['ratio_npy']:6.2f}   "
          f"{mbs('tensorwire_json')} {row['ratio_json']:7.3f}   {failed:6d}", flush=True)


async def run(sizes: list[int], rounds: int, json_rounds: int) -> dict[str, t.Any]:
    procs = []
    try:
        tw_proc, tw_http, tw_grpc = spawn("tensorwire")
        procs.append(tw_proc)
        grpc_proc, _, bare_grpc = spawn("grpc")
        procs.append(grpc_proc)
        http_proc, bare_http, _ = spawn("http")
        procs.append(http_proc)
        clients = Clients((tw_http, tw_grpc), bare_grpc, bare_http)
        try:
            print_header()
            return await measure(clients, sizes, rounds, json_rounds)
        finally:
            await clients.close()
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=sorted(SERVERS), help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1,16,64", help="MiB, comma-separated")
    parser.add_argument("--rounds", type=int, default=10,
                        help="A/B rounds per size (halved at 64 MiB)")
    parser.add_argument("--json-rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="do not write results JSON")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(SERVERS[args.serve]())
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = asyncio.run(run(sizes, args.rounds, args.json_rounds))
    def failed(row: dict[str, t.Any], *names: str) -> int:
        return sum(row[n]["errors"] for n in names)

    targets = {k: {"grpc": target_met(v["ratio_grpc"] >= 0.7,
                                      failed(v, "tensorwire_grpc", "bare_grpc")),
                   "npy": target_met(v["ratio_npy"] >= 0.7,
                                     failed(v, "tensorwire_npy", "bare_http"))}
               for k, v in results.items() if int(k.removesuffix("MiB")) >= 16}
    failed_total = sum(failed(v, "tensorwire_grpc", "bare_grpc", "tensorwire_npy", "bare_http")
                       for k, v in results.items() if k in targets)
    met = all(all(v.values()) for v in targets.values())
    print("target (>= 0.7x of bare at 16 and 64 MiB):",
          verdict(met, failed_total) if targets else "not measured (no size >= 16 MiB)",
          "" if met else targets)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({
            "command": "python bench/tensor_roundtrip.py " + " ".join(sys.argv[1:]),
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                        "platform": platform.platform()},
            "unit": "MB/s = payload bytes one way / median round trip, 1 MB = 1e6 bytes",
            "results": results, "targets_met": targets,
        }, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
