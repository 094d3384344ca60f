"""Open Inference Protocol: tensorwire's v2 routes vs its native routes, and vs MLServer.

    .venv/bin/python bench/open_inference.py            # full run (~6 min + install)
    .venv/bin/python bench/open_inference.py --quick    # 1 round, short runs

One float32 echo model, served by three things at once, each pinned to the server core
(`taskset`): tensorwire (`bench.support.oip_service:OipBench`, both protocols: the native API
`echo` and the v2 model `echo`), and MLServer 1.7 with the same model (a custom
`MLModel` returning its input through `NumpyCodec`). **MLServer is installed by this
script** into its own virtual environment, `bench/results/mlserver-venv` (git-ignored),
the first time it runs; its model folders are written to `bench/results/mlserver-model*`.
MLServer runs twice: as installed (`mlserver`: its defaults, so `parallel_workers: 1`, an
inference worker process fed over IPC, as KServe's MLServer runtime runs it), and with
`parallel_workers: 0` (`mlserver-pw0`: inference on the main process, its fastest
configuration on one core). The targets are checked against the defaults; both are
reported. Server CPU counts a server's worker processes too.

Small requests ([1, 4] float32), requests/s of closed-loop clients at `--concurrency`
(default 16), on the load core: gRPC with `bench.support.load.grpc_client` (the same
pre-serialized bytes to every server speaking v2), HTTP with wrk (`post_file.lua`).
Cases, alternated round by round: gRPC v2 (tensorwire, MLServer) and native; HTTP v2
binary (tritonclient's default; MLServer cannot read it), v2 JSON (tensorwire, MLServer)
and native `.npy`.

16 MiB tensors, MB/s (payload one way / median round trip, 10^6 bytes per MB) of one
request at a time from this process (pinned to the load core), alternated: gRPC v2
(tensorwire, MLServer; `raw_input_contents`) and native (`tensorwire.v1.Tensor`); HTTP
v2 binary and native `.npy`. Each answer is checked to be the tensor sent. Writes
bench/results/open_inference.json.

Targets (issue 15): v2 gRPC small >= 0.9x native gRPC rps; v2 HTTP binary >= 0.8x
native .npy MB/s at 16 MiB; tensorwire >= 2x MLServer's rps on small v2 requests over
both protocols, and >= 3x its MB/s at 16 MiB over gRPC. Failed small calls are counted
per case by the load clients and printed beside requests/s; a target is met only when no
call of the cases it compares failed (a 16 MiB call that fails stops the run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench.http_json import finish, tensorwire_cmd
from bench.support.common import (
    PY,
    RESULTS,
    ROOT,
    Pinning,
    Proc,
    core_times,
    failed_calls,
    free_port,
    header,
    http_ready,
    machine_info,
    run_load,
    running,
    table,
    target_met,
    verdict,
    wait_quiet,
    write_results,
    wrk_result,
)

MLSERVER = "mlserver==1.7.1"
#: uvloop 0.22 made `asyncio.get_event_loop()` raise outside a running loop, which
#: MLServer 1.7.1's inference worker calls at start: with a newer uvloop its default
#: configuration (parallel_workers 1) dies on its first worker.
UVLOOP = "uvloop<0.22"
VENV = RESULTS / "mlserver-venv"
MODEL_DIR = RESULTS / "mlserver-model"
LUA = ROOT / "bench" / "support" / "load" / "post_file.lua"
MiB = 1024 * 1024
LIMIT = 64 * MiB
MODEL = "echo"
INFER = "/inference.GRPCInferenceService/ModelInfer"
NATIVE_GRPC = "/oip_bench.OipBench/Echo"
IHCL = "Inference-Header-Content-Length"

MLSERVER_MODEL = '''\
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class Echo(MLModel):
    """The benchmark's model: the input tensor back as the output `result`."""

    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = NumpyCodec.decode_input(payload.inputs[0])
        return InferenceResponse(model_name=self.name,
                                 outputs=[NumpyCodec.encode_output("result", x)])
'''


# ---------------------------------------------------------------------- servers


def ensure_mlserver() -> Path:
    """MLServer's CLI, installed into bench/results/mlserver-venv on first use."""
    exe = VENV / "bin" / "mlserver"
    if exe.exists():
        return exe
    print(f"installing {MLSERVER} ({UVLOOP}) into {VENV.relative_to(ROOT)} (git-ignored; once)",
          flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", MLSERVER, UVLOOP], check=True)
    return exe


def mlserver_version() -> str:
    out = subprocess.run([str(VENV / "bin" / "python"), "-c",
                          "import mlserver; print(mlserver.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def write_mlserver_model(folder: Path, http_port: int, grpc_port: int, metrics_port: int,
                         parallel_workers: int | None) -> Path:
    """A model folder MLServer starts from: the model, its settings, the server's."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "echo_model.py").write_text(MLSERVER_MODEL)
    (folder / "model-settings.json").write_text(json.dumps(
        {"name": MODEL, "implementation": "echo_model.Echo"}))
    settings: dict[str, Any] = {
        "host": "127.0.0.1", "http_port": http_port, "grpc_port": grpc_port,
        "metrics_port": metrics_port, "grpc_max_message_length": LIMIT, "debug": False,
        "metrics_dir": str(folder / ".metrics")}
    if parallel_workers is not None:
        settings["parallel_workers"] = parallel_workers
    (folder / "settings.json").write_text(json.dumps(settings))
    return folder


class TreeProc(Proc):
    """A server whose CPU includes its child processes' (MLServer's inference worker)."""

    def cpu_seconds(self) -> float:
        total = 0.0
        for pid in [self.pid, *_descendants(self.pid)]:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def servers(pin: Pinning, mlserver: bool = True) -> dict[str, tuple[Proc, str, str]]:
    """name -> (process, HTTP base URL, gRPC target)."""
    tw_http, tw_grpc = free_port(), free_port()
    tw = Proc("tensorwire", [*pin.prefix("server"), *tensorwire_cmd(), "serve",
                             "bench.support.oip_service:OipBench", "--http-port", str(tw_http),
                             "--grpc-port", str(tw_grpc), "--max-request-size", str(LIMIT),
                             "--max-response-size", str(LIMIT)])
    out = {"tensorwire": (tw, f"http://127.0.0.1:{tw_http}", f"127.0.0.1:{tw_grpc}")}
    if mlserver:
        exe = ensure_mlserver()
        for name, folder, workers in (("mlserver", MODEL_DIR, None),
                                      ("mlserver-pw0", MODEL_DIR.with_name(
                                          MODEL_DIR.name + "-pw0"), 0)):
            http, grpc_, metrics = free_port(), free_port(), free_port()
            write_mlserver_model(folder, http, grpc_, metrics, workers)
            proc = TreeProc(name, [*pin.prefix("server"), str(exe), "start", str(folder)])
            out[name] = (proc, f"http://127.0.0.1:{http}", f"127.0.0.1:{grpc_}")
    return out


def ready(procs: dict[str, tuple[Proc, str, str]]) -> Any:
    def check(proc: Proc) -> None:
        _, url, target = procs[proc.name]
        http_ready(f"{url}/v2/models/{MODEL}/ready", proc, timeout=180)
        grpc_ready(target, proc)

    return check


def grpc_ready(target: str, proc: Proc) -> None:
    """ServerReady over the v2 service (MLServer has no grpc.health.v1)."""
    import grpc

    from tensorwire import inference as pb

    deadline = time.monotonic() + 120
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(INFER.replace("ModelInfer", "ServerReady"),
                                   request_serializer=pb.ServerReadyRequest.SerializeToString,
                                   response_deserializer=pb.ServerReadyResponse.FromString)
        while time.monotonic() < deadline:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited")
            try:
                if call(pb.ServerReadyRequest(), timeout=2).ready:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    raise TimeoutError(f"{target} not ready")


# ---------------------------------------------------------------------- requests


def v2_grpc(x: np.ndarray) -> bytes:
    """A ModelInferRequest as tritonclient sends it: raw_input_contents."""
    from tensorwire import inference as pb

    msg = pb.ModelInferRequest(model_name=MODEL)
    msg.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
    msg.raw_input_contents.append(x.tobytes())
    return msg.SerializeToString()


def v2_binary(x: np.ndarray) -> tuple[bytes, dict[str, str]]:
    """An HTTP body with Triton's binary extension, as tritonclient sends it."""
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()
    return head + x.tobytes(), {IHCL: str(len(head))}


def v2_json(x: np.ndarray) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.ravel().tolist()}]}).encode()
    return body, {"Content-Type": "application/json"}


def native_npy(x: np.ndarray) -> tuple[bytes, dict[str, str]]:
    from tensorwire.wire import npy

    return npy.write(x), {"Content-Type": npy.NPY, "Accept": npy.NPY}


def native_grpc_messages() -> Any:
    import tensorwire
    from bench.support.oip_service import OipBench
    from tensorwire.protobuf.descriptors import service_proto

    return service_proto(tensorwire.get_service_spec(OipBench)).messages["echo"]


def parse_v2_grpc(data: bytes) -> np.ndarray:
    """The `result` of a ModelInferResponse, raw (tensorwire) or typed (MLServer).

    Big raw outputs are read as the server reads big raw inputs: cut out of the
    received bytes as views before the rest is parsed (what a fast client does; the
    native client reads its Tensor data the same way).
    """
    from tensorwire import inference as pb
    from tensorwire.v2.raw_contents import RAW_OUTPUT_CONTENTS, split_raw_inputs

    head, raw = split_raw_inputs(data, RAW_OUTPUT_CONTENTS)
    reply = pb.ModelInferResponse.FromString(head)
    out = reply.outputs[0]
    raw = raw if raw is not None else reply.raw_output_contents
    if raw:
        return np.frombuffer(raw[0], "<f4").reshape(list(out.shape))
    return np.array(out.contents.fp32_contents, np.float32).reshape(list(out.shape))


def parse_v2_http(data: bytes, length: str | None) -> np.ndarray:
    if length is None:
        (out,) = json.loads(data)["outputs"]
        return np.array(out["data"], np.float32).reshape(out["shape"])
    head = json.loads(data[:int(length)])
    (out,) = head["outputs"]
    return np.frombuffer(data, "<f4", offset=int(length)).reshape(out["shape"])


# ---------------------------------------------------------------------- small: rps


def small_cases(procs: dict[str, tuple[Proc, str, str]], x: np.ndarray
                ) -> list[dict[str, Any]]:
    tw = procs["tensorwire"]
    v2_bytes = v2_grpc(x)
    native = native_grpc_messages().request_bytes({"x": x})
    infer = f"/v2/models/{MODEL}/infer"
    cases = [
        {"name": "grpc v2 tensorwire", "server": "tensorwire", "grpc": (tw[2], INFER, v2_bytes)},
        {"name": "grpc native tensorwire", "server": "tensorwire",
         "grpc": (tw[2], NATIVE_GRPC, native)},
        {"name": "http v2 binary tensorwire", "server": "tensorwire",
         "http": (tw[1] + infer, *v2_binary(x))},
        {"name": "http native npy tensorwire", "server": "tensorwire",
         "http": (tw[1] + "/echo", *native_npy(x))},
        {"name": "http v2 json tensorwire", "server": "tensorwire",
         "http": (tw[1] + infer, *v2_json(x))},
    ]
    for name in ("mlserver", "mlserver-pw0"):
        ml = procs.get(name)
        if ml is not None:
            cases += [
                {"name": f"grpc v2 {name}", "server": name, "grpc": (ml[2], INFER, v2_bytes)},
                {"name": f"http v2 json {name}", "server": name,
                 "http": (ml[1] + infer, *v2_json(x))},
            ]
    return cases


def check_small(case: dict[str, Any], x: np.ndarray) -> None:
    """Every case answers the tensor it was sent before its speed means anything."""
    import urllib.request

    import grpc

    if "grpc" in case:
        target, method, request = case["grpc"]
        with grpc.insecure_channel(target) as channel:
            reply = channel.unary_unary(method)(request, timeout=10)
        got = native_grpc_messages().parse_response(reply) if method == NATIVE_GRPC \
            else parse_v2_grpc(reply)
    else:
        url, body, headers = case["http"]
        req = urllib.request.Request(url, data=body, headers=headers)
        with urllib.request.urlopen(req, timeout=10) as r:
            data = r.read()
            if url.endswith("/echo"):
                from tensorwire.wire import npy

                got = npy.read(data)
            else:
                got = parse_v2_http(data, r.headers.get(IHCL))
    if not np.array_equal(np.asarray(got).reshape(-1), x.reshape(-1)):
        raise RuntimeError(f"{case['name']} did not echo the tensor: {got!r}")


def measure_small(case: dict[str, Any], proc: Proc, pin: Pinning, args: argparse.Namespace,
                  body_dir: Path) -> dict[str, Any]:
    cpu: dict[str, Any] = {}
    waited = wait_quiet(pin.cores(), max_wait=args.max_wait)

    def mark() -> None:
        cpu["start"] = proc.cpu_seconds()
        cpu["cores"] = core_times()

    if "grpc" in case:
        target, method, request = case["grpc"]
        result = run_load([*pin.prefix("load"), PY, "-m", "bench.support.load.grpc_client",
                           "--target", target, "--method", method, "--request-hex",
                           request.hex(), "--concurrency", str(args.concurrency),
                           "--duration", str(args.duration), "--warmup", str(args.warmup)],
                          on_warm=mark)
        return finish(result, proc, pin, cpu, waited)
    url, body, headers = case["http"]
    path = body_dir / (case["name"].replace(" ", "_") + ".bin")
    path.write_bytes(body)
    env = ["env", f"BENCH_BODY_FILE={path}",
           "BENCH_HEADERS=" + ";".join(f"{k}:{v}" for k, v in headers.items())]
    base = [*pin.prefix("load"), "wrk", "-t1", f"-c{args.concurrency}", "--latency", "-s",
            str(LUA)]
    warm = run_load([*env, *base, f"-d{max(1, round(args.warmup))}s", url])
    mark()
    result = wrk_result(run_load([*env, *base, f"-d{max(1, round(args.duration))}s", url]),
                        warm)
    return finish(result, proc, pin, cpu, waited)


# ---------------------------------------------------------------------- big: MB/s


class BigClients:
    """One round trip per case, returning the array that came back."""

    def __init__(self, procs: dict[str, tuple[Proc, str, str]], x: np.ndarray) -> None:
        import aiohttp
        import grpc

        options = [("grpc.max_receive_message_length", LIMIT),
                   ("grpc.max_send_message_length", LIMIT)]
        self.x = x
        self.messages = native_grpc_messages()
        self.channels = {name: grpc.aio.insecure_channel(p[2], options=options)
                         for name, p in procs.items()}
        self.urls = {name: p[1] for name, p in procs.items()}
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1), read_bufsize=4 * MiB)
        self.v2_bytes = v2_grpc(x)  # built once: every server gets the very same bytes
        self.binary = v2_binary(x)
        self.npy = native_npy(x)

    async def close(self) -> None:
        await self.session.close()
        for channel in self.channels.values():
            await channel.close()

    async def grpc_v2(self, server: str) -> np.ndarray:
        call = self.channels[server].unary_unary(INFER)
        return parse_v2_grpc(await call(self.v2_bytes, timeout=120))

    async def grpc_native(self) -> np.ndarray:
        call = self.channels["tensorwire"].unary_unary(NATIVE_GRPC)
        m = self.messages
        return m.parse_response(await call(m.request_bytes({"x": self.x}), timeout=120))

    async def http_v2_binary(self) -> np.ndarray:
        body, headers = self.binary
        url = f"{self.urls['tensorwire']}/v2/models/{MODEL}/infer"
        async with self.session.post(url, data=body, headers=headers) as r:
            assert r.status == 200, await r.text()
            return parse_v2_http(await r.read(), r.headers.get(IHCL))

    async def http_native_npy(self) -> np.ndarray:
        from tensorwire.wire import npy

        body, headers = self.npy
        async with self.session.post(f"{self.urls['tensorwire']}/echo", data=body,
                                     headers=headers) as r:
            assert r.status == 200, await r.text()
            return npy.read(await r.read())


async def measure_big(procs: dict[str, tuple[Proc, str, str]], rounds: int
                      ) -> dict[str, Any]:
    x = np.random.default_rng(0).standard_normal(16 * MiB // 4, dtype=np.float32)
    clients = BigClients(procs, x)
    cases = {
        "grpc v2 tensorwire": lambda: clients.grpc_v2("tensorwire"),
        "grpc native tensorwire": clients.grpc_native,
        "http v2 binary tensorwire": clients.http_v2_binary,
        "http native npy tensorwire": clients.http_native_npy,
    }
    for name in ("mlserver", "mlserver-pw0"):
        if name in procs:
            cases[f"grpc v2 {name}"] = lambda name=name: clients.grpc_v2(name)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for name, call in cases.items():  # warm-up, and the answer is the tensor
            out = await call()
            if not np.array_equal(np.asarray(out).reshape(-1), x):
                raise RuntimeError(f"{name} did not echo the tensor")
        names = list(cases)
        for i in range(rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                call = cases[name]
                start = time.perf_counter()
                await call()
                samples[name].append(time.perf_counter() - start)
            print(f"  16 MiB round {i + 1}/{rounds}", flush=True)
    finally:
        await clients.close()
    return {name: {"median_ms": statistics.median(v) * 1e3,
                   "mb_per_s": x.nbytes / statistics.median(v) / 1e6, "samples": len(v)}
            for name, v in samples.items()}


# ---------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured run")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds, small requests")
    p.add_argument("--big-rounds", type=int, default=7, help="alternated rounds at 16 MiB")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--max-wait", type=float, default=20.0,
                   help="seconds to wait for quiet cores before each run")
    p.add_argument("--quick", action="store_true", help="1 round of 2 s runs")
    p.add_argument("--without-mlserver", action="store_true",
                   help="tensorwire's cases only (no install; no MLServer ratios)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.big_rounds, args.duration, args.warmup = 1, 3, 2.0, 0.5
    pin = Pinning.detect()
    if pin.load is not None:
        os.sched_setaffinity(0, {pin.load})  # the 16 MiB client runs here
    procs = servers(pin, mlserver=not args.without_mlserver)
    load = (f"small: {args.concurrency} closed-loop clients (grpc: bench.support.load.grpc_client; "
            "http: wrk -t1, post_file.lua), own process; 16 MiB: one request at a time "
            "from the bench process")
    print(header("Open Inference Protocol: v2 vs native, tensorwire vs MLServer", pin, load))
    x = np.array([[5.1, 3.5, 1.4, 0.2]], np.float32)
    with running([p_ for p_, _, _ in procs.values()], ready(procs)), \
            tempfile.TemporaryDirectory(prefix="oip-bench-") as body_dir:
        cases = small_cases(procs, x)
        for case in cases:
            check_small(case, x)
        rounds: list[dict[str, dict[str, Any]]] = []
        for r in range(args.rounds):
            row = {}
            # each round starts one case later: no case always runs first or after
            # the same neighbour on a shared machine
            for case in cases[r % len(cases):] + cases[:r % len(cases)]:
                proc = procs[case["server"]][0]
                row[case["name"]] = res = measure_small(case, proc, pin, args, Path(body_dir))
                print(f"  round {r + 1}: {case['name']:28s} {res['rps']:9.0f} req/s "
                      f"{failed_calls(res)} failed", flush=True)
            rounds.append(row)
        big = asyncio.run(measure_big(procs, args.big_rounds))
    small = {c["name"]: {**{m: statistics.median(r[c["name"]][m] for r in rounds)
                            for m in ("rps", "p50_ms", "p99_ms", "server_us_per_req",
                                      "foreign_cpu")},
                         "errors": sum(failed_calls(r[c["name"]]) for r in rounds)}
             for c in cases}

    def failed(*names: str) -> int:
        """Failed small calls of the cases a target compares (their 16 MiB calls either
        all succeeded or stopped the run)."""
        return failed_calls(*(small[n] for n in names if n in small))

    def ratio(a: str, b: str, metric: str = "rps") -> float:
        # the median of per-round ratios: drift of a shared machine hits both alike
        return statistics.median(r[a][metric] / r[b][metric] for r in rounds)

    ratios = {
        "grpc v2 / native rps": ratio("grpc v2 tensorwire", "grpc native tensorwire"),
        "http v2 binary / native npy rps": ratio("http v2 binary tensorwire",
                                                 "http native npy tensorwire"),
        "16MiB http v2 binary / native npy MB/s": big["http v2 binary tensorwire"][
            "mb_per_s"] / big["http native npy tensorwire"]["mb_per_s"],
        "16MiB grpc v2 / native MB/s": big["grpc v2 tensorwire"]["mb_per_s"] / big[
            "grpc native tensorwire"]["mb_per_s"],
    }
    goals = {
        "grpc v2 >= 0.9x native rps": (ratios["grpc v2 / native rps"] >= 0.9, failed(
            "grpc v2 tensorwire", "grpc native tensorwire")),
        "16MiB http v2 binary >= 0.8x native npy": (ratios[
            "16MiB http v2 binary / native npy MB/s"] >= 0.8, 0),
    }
    if "mlserver" in procs:
        ratios |= {
            "grpc tensorwire / mlserver rps": ratio("grpc v2 tensorwire", "grpc v2 mlserver"),
            "http json tensorwire / mlserver rps": ratio("http v2 json tensorwire",
                                                         "http v2 json mlserver"),
            "http binary tensorwire / mlserver json rps": ratio("http v2 binary tensorwire",
                                                                "http v2 json mlserver"),
            "16MiB grpc tensorwire / mlserver MB/s": big["grpc v2 tensorwire"]["mb_per_s"]
            / big["grpc v2 mlserver"]["mb_per_s"],
            "grpc tensorwire / mlserver-pw0 rps": ratio("grpc v2 tensorwire",
                                                        "grpc v2 mlserver-pw0"),
            "http json tensorwire / mlserver-pw0 rps": ratio("http v2 json tensorwire",
                                                             "http v2 json mlserver-pw0"),
            "16MiB grpc tensorwire / mlserver-pw0 MB/s": big["grpc v2 tensorwire"][
                "mb_per_s"] / big["grpc v2 mlserver-pw0"]["mb_per_s"],
            "grpc mlserver-pw0 / tensorwire server us/req": ratio(
                "grpc v2 mlserver-pw0", "grpc v2 tensorwire", "server_us_per_req"),
            "http json mlserver-pw0 / tensorwire server us/req": ratio(
                "http v2 json mlserver-pw0", "http v2 json tensorwire", "server_us_per_req"),
        }
        goals |= {
            "grpc >= 2x mlserver rps": (ratios["grpc tensorwire / mlserver rps"] >= 2,
                                        failed("grpc v2 tensorwire", "grpc v2 mlserver")),
            "http >= 2x mlserver rps": (ratios["http json tensorwire / mlserver rps"] >= 2,
                                        failed("http v2 json tensorwire",
                                               "http v2 json mlserver")),
            "16MiB grpc >= 3x mlserver MB/s": (ratios[
                "16MiB grpc tensorwire / mlserver MB/s"] >= 3, 0),
        }
    targets = {name: target_met(holds, n) for name, (holds, n) in goals.items()}
    print()
    print(table(["small [1, 4] float32", "req/s", "failed", "p50 ms", "p99 ms",
                 "server us/req"],
                [[n, s["rps"], s["errors"], s["p50_ms"], s["p99_ms"], s["server_us_per_req"]]
                 for n, s in small.items()]))
    print()
    print(table(["16 MiB float32", "MB/s", "median ms"],
                [[n, b["mb_per_s"], b["median_ms"]] for n, b in big.items()]))
    print()
    print(table(["ratio", "value"], [[k, v] for k, v in ratios.items()]))
    print()
    for name, met in targets.items():
        print(f"target {name}: {verdict(met, goals[name][1])}")
    payload = {
        "command": "python bench/open_inference.py " + " ".join(argv or sys.argv[1:]),
        "machine": machine_info(), "pinning": pin.describe(), "load": load,
        "mlserver": None if "mlserver" not in procs else {
            "version": mlserver_version(), "venv": str(VENV.relative_to(ROOT)),
            "settings": "mlserver: defaults (parallel_workers 1); mlserver-pw0: "
                        "parallel_workers 0"},
        "unit": "req/s: medians over rounds; MB/s: payload one way / median round trip",
        "small": small, "small_rounds": rounds, "big_16MiB": big, "ratios": ratios,
        "targets_met": targets,
        "targets_failed_calls": {name: n for name, (_, n) in goals.items()},
    }
    path = write_results("open_inference" if "mlserver" in procs else
                         "open_inference_without_mlserver", payload)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
