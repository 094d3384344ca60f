"""gRPC small unary: tensorwire vs a bare grpc.aio servicer on a protoc-generated stub.

    .venv/bin/python bench/grpc_unary.py            # full run (~3 min)
    .venv/bin/python bench/grpc_unary.py --quick    # one round, short runs

Servers: `tensorwire serve bench.support.services:Bench --no-http` and
`bench.support.baselines.bare_grpc` (bare.proto compiled by grpc_tools.protoc into a temp dir
at run time), both pinned to one core. Load: `bench.support.load.grpc_client` (grpc.aio, one
channel, N coroutines, pre-serialized request bytes) on the other core. The request
messages of both servers are wire-identical, so the client sends the same bytes to each.
Writes bench/results/grpc_unary.json.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.http_json import (
    compare,
    finish,
    parse_args,
    print_summary,
    results_name,
    targets,
    tensorwire_cmd,
)
from bench.support.baselines.stubs import compile_stubs, load_stubs
from bench.support.common import (
    PY,
    ROOT,
    Pinning,
    Proc,
    core_times,
    free_port,
    run_load,
    wait_quiet,
    write_results,
)

VARIANTS = {"async": "/bench.Bench/Predict", "def": "/bench.Bench/PredictSync"}
REQUEST = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}


def grpc_servers(pin: Pinning, stub_dir: Path, loop: str = "asyncio"
                 ) -> dict[str, tuple[Proc, str]]:
    """tensorwire and bare grpc.aio on `loop`; on uvloop also bare grpc.aio on asyncio."""
    tw_port = free_port()
    out = {"tensorwire": (Proc("tensorwire", [*pin.prefix("server"), *tensorwire_cmd(),
                                              "serve", "bench.support.services:Bench",
                                              "--grpc-port", str(tw_port), "--no-http",
                                              "--loop", loop]),
                          f"127.0.0.1:{tw_port}")}
    for name, bare_loop in (("bare", loop), *((("bare-asyncio", "asyncio"),)
                                              if loop != "asyncio" else ())):
        port = free_port()
        out[name] = (Proc(name, [*pin.prefix("server"), PY, "-m",
                                 "bench.support.baselines.bare_grpc", "--port", str(port),
                                 "--stubs", str(stub_dir), "--loop", bare_loop]),
                     f"127.0.0.1:{port}")
    return out


def check_same_answer(procs: dict[str, tuple[Proc, str]], method: str, request: bytes,
                      parse) -> dict[str, Any]:
    import grpc
    from google.protobuf.json_format import MessageToDict

    answers = {}
    for name, (_, target) in procs.items():
        with grpc.insecure_channel(target) as channel:
            reply = channel.unary_unary(method)(request, timeout=10)
        answers[name] = MessageToDict(parse(reply))
    if any(answer != answers["tensorwire"] for answer in answers.values()):
        raise RuntimeError(f"the servers disagree on {method}: {answers}")
    return answers["tensorwire"]


def measure_grpc(pin: Pinning, target: str, method: str, request: bytes, concurrency: int,
                 duration: float, warmup: float, proc: Proc, max_wait: float,
                 stream: bool = False, expect_chunks: int = 0) -> dict[str, Any]:
    """One load run of bench.support.load.grpc_client (a stream of another length than
    `expect_chunks`, when given, is a failed call)."""
    cpu: dict[str, Any] = {}
    waited = wait_quiet(pin.cores(), max_wait=max_wait)

    def mark() -> None:
        cpu["start"] = proc.cpu_seconds()
        cpu["cores"] = core_times()

    cmd = [*pin.prefix("load"), PY, "-m", "bench.support.load.grpc_client", "--target", target,
           "--method", method, "--request-hex", request.hex(),
           "--concurrency", str(concurrency), "--duration", str(duration),
           "--warmup", str(warmup)]
    if stream:
        cmd += ["--stream", "--expect-chunks", str(expect_chunks)]
    result = run_load(cmd, on_warm=mark)
    return finish(result, proc, pin, cpu, waited)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, with_load=False)
    pin = Pinning.detect()
    stub_dir = compile_stubs(tempfile.mkdtemp(prefix="tensorwire-bench-stubs-"))
    pb, _ = load_stubs(stub_dir)
    request = pb.PredictRequest(**REQUEST).SerializeToString()
    procs = grpc_servers(pin, stub_dir, args.loop)
    variants = {v: VARIANTS[v] for v in args.variants}
    load = "bench.support.load.grpc_client: grpc.aio, 1 channel, N coroutines, own process"

    def run_case(proc: Proc, target: str, method: str, c: int) -> dict[str, Any]:
        return measure_grpc(pin, target, method, request, c, args.duration, args.warmup,
                            proc, args.max_wait)

    name = results_name("grpc_unary", args.loop)
    payload = compare(f"gRPC small unary: tensorwire vs bare grpc.aio ({args.loop})", name,
                      procs,
                      variants, run_case, args, pin, load,
                      extra={"check": lambda procs, method: check_same_answer(
                          procs, method, request, pb.Prediction.FromString)})
    print_summary(payload)
    client = [r[s].get("client_cpu", 0) for run in payload["runs"] for r in run["rounds"]
              for s in r]
    if client and max(client) > 0.9:
        print(f"note: the load client used up to {max(client):.0%} of its core; where it "
              "did, both servers were held back by it (compare us/req)")
    payload["targets"] = targets(payload)
    payload["loop"] = args.loop
    path = write_results(name, payload)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
