"""Streams in: the per-message cost of a bidirectional API, tensorwire vs the bare servers.

    .venv/bin/python bench/streams_in.py            # 3 alternating rounds (~2 min)
    .venv/bin/python bench/streams_in.py --quick    # one short round

One API (`bench.support.streams_in_servers.StreamsBench.sums`: a frame of 16 float32 samples in,
its sum out, per message) over gRPC (a bidirectional rpc) and over HTTP (the API's
WebSocket), beside a bare grpc.aio `stream_stream` handler and a bare aiohttp
WebSocket doing the same work on the same messages (`bench/support/streams_in_servers.py`).
The load client (this file, `--client`) runs in its own process on the other core:

- `pipelined`: `streams` calls at once, each sending `messages` elements as fast as
  flow control lets it while reading the answers: messages/s, and the server's CPU per
  message (its process' CPU seconds over the measured messages), the figure that says
  what tensorwire adds to each message;
- `pingpong`: one call, each element sent only once the last answer came: the round
  trip of one message (p50, p99).

Servers alternate A B A B per round, as every bench here; a call that fails, or
answers another number of messages than it sent, is a failed call, counted beside the
figures. Writes bench/results/streams_in.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import (
    PY,
    Pinning,
    Proc,
    core_times,
    free_port,
    grpc_serving,
    http_ready,
    machine_info,
    run_load,
    table,
    wait_quiet,
    write_results,
)

SERVICE = "bench.support.streams_in_servers:StreamsBench"
FRAME = [float(i) for i in range(16)]


# ---------------------------------------------------------------------- the client


def _grpc_request() -> bytes:
    import numpy as np

    from bench.support.streams_in_servers import messages
    from tensorwire.wire import tensors

    request_cls, _ = messages()
    msg = request_cls()
    tensors.fill(np.asarray(FRAME, np.float32), msg.frames)
    return msg.SerializeToString()


async def grpc_calls(target: str, streams: int, count: int, pingpong: bool
                     ) -> tuple[int, list[float], int]:
    """(messages answered, round trips in s (pingpong), failed calls)."""
    import grpc

    data = _grpc_request()
    async with grpc.aio.insecure_channel(target) as channel:
        method = channel.stream_stream("/streams_bench.StreamsBench/Sums")

        async def pipelined() -> int:
            async def requests() -> Any:
                for _ in range(count):
                    yield data

            got = 0
            async for _ in method(requests()):
                got += 1
            return got

        async def ping() -> tuple[int, list[float]]:
            call = method()
            times = []
            for _ in range(count):
                began = time.perf_counter()
                await call.write(data)
                await call.read()
                times.append(time.perf_counter() - began)
            await call.done_writing()
            await call.read()
            return count, times

        return await _gather(pipelined, ping, streams, count, pingpong)


async def ws_calls(url: str, streams: int, count: int, pingpong: bool
                   ) -> tuple[int, list[float], int]:
    import aiohttp

    text = json.dumps(FRAME)
    async with aiohttp.ClientSession() as session:
        async def pipelined() -> int:
            async with session.ws_connect(url, protocols=("tensorwire",),
                                          compress=0) as ws:
                async def send() -> None:
                    for _ in range(count):
                        await ws.send_str(text)
                    await ws.send_bytes(b"")

                sender = asyncio.ensure_future(send())
                got = 0
                async for msg in ws:
                    if msg.type is aiohttp.WSMsgType.TEXT:
                        got += 1
                await sender
                return got

        async def ping() -> tuple[int, list[float]]:
            async with session.ws_connect(url, protocols=("tensorwire",),
                                          compress=0) as ws:
                times = []
                for _ in range(count):
                    began = time.perf_counter()
                    await ws.send_str(text)
                    await ws.receive()
                    times.append(time.perf_counter() - began)
                await ws.send_bytes(b"")
                return count, times

        return await _gather(pipelined, ping, streams, count, pingpong)


async def _gather(pipelined: Any, ping: Any, streams: int, count: int, pingpong: bool
                  ) -> tuple[int, list[float], int]:
    if pingpong:
        done, times = await ping()
        return done, times, 0
    results = await asyncio.gather(*(pipelined() for _ in range(streams)),
                                   return_exceptions=True)
    answered = sum(r for r in results if isinstance(r, int))
    failed = sum(1 for r in results if not isinstance(r, int) or r != count)
    return answered, [], failed


def client(args: argparse.Namespace) -> None:
    """The load client: a warm-up round, `WARM`, the measured round, one JSON line."""
    calls = grpc_calls if args.wire == "grpc" else ws_calls

    async def main() -> dict[str, Any]:
        await calls(args.target, args.streams, max(args.messages // 10, 50), args.pingpong)
        print("WARM", flush=True)
        began = time.perf_counter()
        answered, times, failed = await calls(args.target, args.streams, args.messages,
                                              args.pingpong)
        seconds = time.perf_counter() - began
        out: dict[str, Any] = {"messages": answered, "seconds": seconds,
                               "msgs_per_s": answered / seconds, "failed_calls": failed}
        if times:
            times.sort()
            out["rtt_p50_us"] = times[len(times) // 2] * 1e6
            out["rtt_p99_us"] = times[int(len(times) * 0.99)] * 1e6
        return out

    print(json.dumps(asyncio.run(main())), flush=True)


# ---------------------------------------------------------------------- the driver


def measure(pin: Pinning, proc: Proc, wire: str, target: str, streams: int, messages: int,
            pingpong: bool) -> dict[str, Any]:
    wait_quiet(pin.cores(), max_wait=10)
    cpu: dict[str, float] = {}

    def mark() -> None:
        cpu["start"] = proc.cpu_seconds()
        cpu["cores"] = core_times()  # type: ignore[assignment]

    result = run_load([*pin.prefix("load"), PY, "-m", "bench.streams_in", "--client",
                       "--wire", wire, "--target", target, "--streams", str(streams),
                       "--messages", str(messages), *(["--pingpong"] if pingpong else [])],
                      on_warm=mark)
    used = proc.cpu_seconds() - cpu["start"]
    result["server_us_per_msg"] = used / max(result["messages"], 1) * 1e6
    result["server_cpu_s"] = used
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--wire", choices=("grpc", "ws"), help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--pingpong", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--streams", type=int, default=8, help="calls at once (pipelined)")
    parser.add_argument("--messages", type=int, default=20000, help="messages per call")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round, fewer messages")
    parser.add_argument("--wires", default="grpc,ws", help="which wires (grpc, ws)")
    parser.add_argument("--modes", default="pipelined,pingpong", help="which modes")
    args = parser.parse_args()
    if args.client:
        client(args)
        return
    if args.quick:
        args.rounds, args.messages = 1, 3000
    pin = Pinning.detect()
    http, grpc_port, bare_grpc, bare_ws = free_port(), free_port(), free_port(), free_port()
    procs = {
        "tensorwire": Proc("tensorwire", [*pin.prefix("server"), PY, "-m", "tensorwire",
                                          "serve", SERVICE, "--http-port", str(http),
                                          "--grpc-port", str(grpc_port), "--no-v2",
                                          "--loop", "asyncio"]),
        "bare-grpc": Proc("bare-grpc", [*pin.prefix("server"), PY, "-m",
                                        "bench.support.streams_in_servers", "bare-grpc",
                                        str(bare_grpc)]),
        "bare-ws": Proc("bare-ws", [*pin.prefix("server"), PY, "-m",
                                    "bench.support.streams_in_servers", "bare-ws", str(bare_ws)]),
    }
    targets = {
        "grpc": {"tensorwire": ("tensorwire", f"127.0.0.1:{grpc_port}"),
                 "bare": ("bare-grpc", f"127.0.0.1:{bare_grpc}")},
        "ws": {"tensorwire": ("tensorwire", f"http://127.0.0.1:{http}/sums"),
               "bare": ("bare-ws", f"http://127.0.0.1:{bare_ws}/sums")},
    }
    runs: dict[str, list[dict[str, Any]]] = {}
    try:
        for p in procs.values():
            p.start()
        http_ready(f"http://127.0.0.1:{http}/readyz", procs["tensorwire"])
        grpc_serving(f"127.0.0.1:{grpc_port}", procs["tensorwire"])
        _wait_port(bare_grpc, procs["bare-grpc"])  # no health service: it listens
        http_ready(f"http://127.0.0.1:{bare_ws}/readyz", procs["bare-ws"])
        for round_ in range(args.rounds):
            for wire in args.wires.split(","):
                for mode in args.modes.split(","):
                    order = ("tensorwire", "bare") if round_ % 2 == 0 else ("bare", "tensorwire")
                    for who in order:
                        name, target = targets[wire][who]
                        pingpong = mode == "pingpong"
                        result = measure(pin, procs[name], wire, target, args.streams,
                                         args.messages // (4 if pingpong else 1), pingpong)
                        runs.setdefault(f"{wire} {mode} {who}", []).append(result)
                        print(f"round {round_ + 1} {wire} {mode} {who}: "
                              f"{result['msgs_per_s']:.0f} msg/s, "
                              f"{result['server_us_per_msg']:.1f} us/msg server CPU"
                              + (f", rtt p50 {result['rtt_p50_us']:.0f} us"
                                 if "rtt_p50_us" in result else "")
                              + f", failed calls {result['failed_calls']}", flush=True)
    finally:
        for p in procs.values():
            p.stop()
    summary = summarize(runs)
    rows = [[key, *(f"{v:.1f}" if isinstance(v, float) else v for v in values)]
            for key, values in summary.items()]
    print()
    print(table(["wire mode", "tensorwire", "bare", "ratio", "figure"], rows))
    write_results("streams_in", {"machine": machine_info(), "pinning": pin.describe(),
                                 "args": vars(args), "runs": runs, "summary": summary})


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[Any]]:
    """Median figures per wire and mode: tensorwire, bare, ratio, what they measure."""
    out: dict[str, list[Any]] = {}
    for wire in ("grpc", "ws"):
        for mode, figures in (("pipelined", ("msgs_per_s", "server_us_per_msg")),
                              ("pingpong", ("rtt_p50_us", "rtt_p99_us"))):
            tw, bare = runs.get(f"{wire} {mode} tensorwire"), runs.get(f"{wire} {mode} bare")
            if not tw or not bare:
                continue
            for figure in figures:
                a = statistics.median(r[figure] for r in tw)
                b = statistics.median(r[figure] for r in bare)
                out[f"{wire} {mode} {figure}"] = [a, b, a / b if b else float("nan"), figure]
    return out


def _wait_port(port: int, proc: Proc, timeout: float = 30.0) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited:\n{proc.logs()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{proc.name} did not listen on {port}")


if __name__ == "__main__":
    main()
