"""HTTP small JSON: tensorwire vs a bare aiohttp handler, same pydantic validation.

    .venv/bin/python bench/http_json.py            # full run (~3 min)
    .venv/bin/python bench/http_json.py --quick    # one round, short runs

Servers: `tensorwire serve bench.support.services:Bench --no-grpc` and
`bench.support.baselines.bare_http`, both pinned to one core. Load: wrk (Lua script
bench/support/load/post.lua) on the other core, or the aiohttp load client when wrk is absent.
Both the `async def` API (`/predict`) and the `def` one (`/predict_sync`, thread pool)
are measured at each concurrency. Writes bench/results/http_json.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import urllib.request
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import (
    PY,
    ROOT,
    Comparison,
    Pinning,
    Proc,
    busy_share,
    core_times,
    failed_calls,
    free_port,
    header,
    http_ready,
    machine_info,
    rps_and_failures,
    run_load,
    running,
    table,
    target_met,
    verdict,
    wait_quiet,
    write_results,
    wrk_result,
)
from bench.support.model import BODY

LUA = ROOT / "bench" / "support" / "load" / "post.lua"
VARIANTS = {"async": "/predict", "def": "/predict_sync"}
METRICS = ("rps", "p50_ms", "p99_ms", "server_us_per_req", "server_cpu", "foreign_cpu")


def tensorwire_cmd() -> list[str]:
    exe = Path(PY).with_name("tensorwire")
    return [str(exe)] if exe.exists() else [PY, "-m", "tensorwire"]


def servers(pin: Pinning, protocol: str, loop: str = "asyncio"
            ) -> dict[str, tuple[Proc, str]]:
    """The servers of one protocol, name -> (process, address): tensorwire and the bare
    baseline on `loop`, and on uvloop also the bare baseline on asyncio (the extra line:
    what a user gains by installing uvloop, against the framework they would otherwise
    run as it comes)."""
    if protocol != "http":
        raise ValueError(protocol)
    tw_port = free_port()
    out = {"tensorwire": (Proc("tensorwire", [*pin.prefix("server"), *tensorwire_cmd(),
                                              "serve", "bench.support.services:Bench",
                                              "--http-port", str(tw_port), "--no-grpc",
                                              "--loop", loop]),
                          f"http://127.0.0.1:{tw_port}")}
    for name, bare_loop in (("bare", loop), *((("bare-asyncio", "asyncio"),)
                                              if loop != "asyncio" else ())):
        port = free_port()
        out[name] = (Proc(name, [*pin.prefix("server"), PY, "-m",
                                 "bench.support.baselines.bare_http", "--port", str(port),
                                 "--loop", bare_loop]), f"http://127.0.0.1:{port}")
    return out


def results_name(base: str, loop: str) -> str:
    """bench/results/<name>.json of a run on `loop` (asyncio keeps the plain name)."""
    return base if loop == "asyncio" else f"{base}_{loop}"


def check_same_answer(urls: dict[str, str], path: str) -> dict[str, Any]:
    """Both servers must give the same answer before their speed means anything."""
    answers = {}
    for name, url in urls.items():
        req = urllib.request.Request(url + path, data=BODY,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            answers[name] = json.loads(r.read())
    if any(answer != answers["tensorwire"] for answer in answers.values()):
        raise RuntimeError(f"the servers disagree on {path}: {answers}")
    return answers["tensorwire"]


def load_tool(choice: str) -> str:
    if choice == "auto":
        return "wrk" if shutil.which("wrk") else "aiohttp"
    if choice == "wrk" and not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install -y wrk)")
    return choice


def measure(tool: str, pin: Pinning, url: str, concurrency: int, duration: float,
            warmup: float, proc: Proc, max_wait: float) -> dict[str, Any]:
    """One load run against one server; server CPU is read around the measured part."""
    cpu: dict[str, Any] = {}
    waited = wait_quiet(pin.cores(), max_wait=max_wait)

    def mark() -> None:
        cpu["start"] = proc.cpu_seconds()
        cpu["cores"] = core_times()

    if tool == "wrk":
        base = [*pin.prefix("load"), "wrk", "-t1", f"-c{concurrency}", "--latency",
                "-s", str(LUA)]
        env_cmd = ["env", f"BENCH_BODY={BODY.decode()}"]
        warm = run_load([*env_cmd, *base, f"-d{max(1, round(warmup))}s", url])
        mark()
        result = wrk_result(run_load([*env_cmd, *base, f"-d{max(1, round(duration))}s", url]),
                            warm)
    else:
        result = run_load([*pin.prefix("load"), PY, "-m", "bench.support.load.http_client",
                           "--url", url, "--body", BODY.decode(),
                           "--concurrency", str(concurrency), "--duration", str(duration),
                           "--warmup", str(warmup)], on_warm=mark)
    return finish(result, proc, pin, cpu, waited)


def finish(result: dict[str, Any], proc: Proc, pin: Pinning, cpu: dict[str, Any],
           waited: float) -> dict[str, Any]:
    """Add server CPU per request and how busy the server's core was with others."""
    used = proc.cpu_seconds() - cpu["start"]
    after = core_times()
    result["server_cpu"] = used / result["elapsed_s"]
    result["server_us_per_req"] = used / max(1, result["requests"]) * 1e6
    if pin.server is not None:
        # Busy time on both cores that was neither the server nor the load client.
        busy = sum(busy_share(cpu["cores"], after, c) for c in pin.cores())
        client = result.get("client_cpu")
        if client is None:  # wrk: its whole process ran during the measured part
            client = result["client_cpu_s"] / result["elapsed_s"]
        result["foreign_cpu"] = max(0.0, busy - result["server_cpu"] - client)
    result["waited_quiet_s"] = waited
    return result


def compare(title: str, name: str, procs: dict[str, tuple[Proc, str]],
            variants: dict[str, str], run_case, args: argparse.Namespace,
            pin: Pinning, load: str, metrics=METRICS, extra: dict | None = None
            ) -> dict[str, Any]:
    """Run every (variant, concurrency) case, alternating servers A B A B per round."""
    print(header(title, pin, load), flush=True)
    comparisons: list[Comparison] = []
    ready = {p.name: addr for p, addr in procs.values()}
    with running([p for p, _ in procs.values()], lambda p: _ready(p, ready[p.name])):
        checks = {v: check(procs, path) for v, path in variants.items()
                  if (check := (extra or {}).get("check"))}
        for variant, path in variants.items():
            for c in args.concurrency:
                comp = Comparison({"variant": variant, "concurrency": c},
                                  names=tuple(procs))  # type: ignore[arg-type]
                for r in range(args.rounds):
                    for server in procs:
                        proc, addr = procs[server]
                        res = run_noise_aware(functools.partial(run_case, proc, addr, path, c),
                                              args)
                        comp.add(server, res)
                        print(f"  {variant:5} c={c:<3} round {r + 1}/{args.rounds} "
                              f"{server:10} {rps_and_failures(res['rps'], res['errors'])} "
                              f"p50={res['p50_ms']:.2f}ms p99={res['p99_ms']:.2f}ms "
                              f"server={res['server_us_per_req']:.0f}us/req "
                              f"others={res.get('foreign_cpu', float('nan')):.0%}",
                              flush=True)
                comparisons.append(comp)
    summary = [c.summary(metrics) for c in comparisons]
    payload = {
        "name": name,
        "title": title,
        "machine": machine_info(),
        "pinning": pin.describe(),
        "load": load,
        "config": {"duration_s": args.duration, "warmup_s": args.warmup,
                   "rounds": args.rounds, "concurrency": args.concurrency,
                   "max_wait_s": args.max_wait, "noise": args.noise,
                   "retries": args.retries,
                   "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])},
        "summary": summary,
        "runs": [{"case": c.case, "rounds": c.rounds} for c in comparisons],
    }
    if checks:
        payload["answers"] = checks
    return payload


def run_noise_aware(run, args: argparse.Namespace) -> dict[str, Any]:
    """Repeat a run (up to --retries times) while other processes ate the server core."""
    for attempt in range(args.retries + 1):
        res = run()
        noise = res.get("foreign_cpu", 0.0)
        if not noise > args.noise or attempt == args.retries:
            break
        print(f"    (other processes used {noise:.0%} of a core: measuring again)",
              flush=True)
    res["attempts"] = attempt + 1
    return res


def _ready(proc: Proc, addr: str) -> None:
    if addr.startswith("http"):
        http_ready(addr + "/readyz", proc)
    else:
        from bench.support.common import grpc_serving

        grpc_serving(addr, proc)


def print_summary(payload: dict[str, Any], names: tuple[str, str] = ("tw", "bare")) -> None:
    rows = []
    for s in payload["summary"]:
        a, b = (k for k in s if isinstance(s[k], dict) and k not in ("ratio", "extra"))
        tw, bare, ratio = s[a], s[b], s["ratio"]
        rows.append([s["variant"], s["concurrency"], tw["rps"], failed_calls(tw), bare["rps"],
                     failed_calls(bare), ratio["rps"], tw["p50_ms"], bare["p50_ms"],
                     tw["p99_ms"], bare["p99_ms"], ratio["p99_ms"], tw["server_us_per_req"],
                     bare["server_us_per_req"]])
    print()
    x, y = names
    print(table(["api", "conc", f"{x} rps", f"{x} failed", f"{y} rps", f"{y} failed", "rps x",
                 f"{x} p50ms", f"{y} p50ms", f"{x} p99ms", f"{y} p99ms", "p99 x",
                 f"{x} us/req", f"{y} us/req"], rows))
    print(f"(x: median over rounds of {x}/{y}; us/req: server CPU per request; failed: "
          "calls that failed in all rounds, warm-up included)")
    for s in payload["summary"]:
        for other, side in s.get("extra", {}).items():
            print(f"{x} vs {other}: {s['variant']} c={s['concurrency']}: rps "
                  f"{side['ratio']['rps']:.2f}x ({side['rps']:.0f} rps, "
                  f"{failed_calls(side)} failed), p99 "
                  f"{side['ratio']['p99_ms']:.2f}x ({side['p99_ms']:.2f} ms)")


def targets(payload: dict[str, Any], rps_min: float = 0.9, p99_max: float = 1.2,
            concurrencies: tuple[int, ...] = (16, 64)) -> list[dict[str, Any]]:
    """Issue 16's targets: both APIs at 16 and 64 clients, rps >= 0.9x and p99 <= 1.2x
    the bare baseline on the same loop; met only if no call to any server of the case
    failed (a failing side makes its ratio meaningless, whichever side it is)."""
    out = []
    for s in payload["summary"]:
        if s["concurrency"] not in concurrencies:
            continue
        r = s["ratio"]
        failed = failed_calls(*(v for k, v in s.items() if isinstance(v, dict)
                                and k not in ("ratio", "extra")),
                              *s.get("extra", {}).values())
        out.append({"case": f"{s['variant']} c={s['concurrency']}",
                    "rps_ratio": r["rps"], "rps_met": target_met(r["rps"] >= rps_min, failed),
                    "p99_ratio": r["p99_ms"],
                    "p99_met": target_met(r["p99_ms"] <= p99_max, failed),
                    "rps_min": rps_min, "p99_max": p99_max, "failed": failed})
    for t in out:
        print(f"target {t['case']}: rps {t['rps_ratio']:.2f}x (>= {rps_min}: "
              f"{verdict(t['rps_met'], t['failed'])}), p99 {t['p99_ratio']:.2f}x "
              f"(<= {p99_max}: {verdict(t['p99_met'], t['failed'])}); "
              f"{t['failed']} failed calls")
    return out


def parse_args(argv: list[str] | None, with_load: bool = True) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per measured run")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds of warm-up per run")
    p.add_argument("--rounds", type=int, default=3, help="A/B rounds per case")
    p.add_argument("--concurrency", default="1,16,64",
                   type=lambda s: [int(x) for x in s.split(",")])
    p.add_argument("--variants", default="async,def",
                   type=lambda s: [x for x in s.split(",") if x])
    if with_load:
        p.add_argument("--load", choices=["auto", "wrk", "aiohttp"], default="auto")
    p.add_argument("--max-wait", type=float, default=30.0,
                   help="seconds to wait for the cores to go quiet before each run")
    p.add_argument("--noise", type=float, default=0.10,
                   help="re-run when other processes used more than this share of a core")
    p.add_argument("--retries", type=int, default=2, help="re-runs of a noisy run")
    p.add_argument("--quick", action="store_true", help="1 round of 2 s runs")
    p.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio",
                   help="the event loop of tensorwire and of the bare baseline (uvloop: "
                        "the bare baseline on asyncio runs too, as an extra line)")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.duration, args.warmup = 1, 2.0, 1.0
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pin = Pinning.detect()
    tool = load_tool(args.load)
    load = ("wrk -t1 -cN with bench/support/load/post.lua (own process)" if tool == "wrk"
            else "bench.support.load.http_client: aiohttp, own process")
    procs = servers(pin, "http", args.loop)
    variants = {v: VARIANTS[v] for v in args.variants}

    def run_case(proc: Proc, url: str, path: str, c: int) -> dict[str, Any]:
        return measure(tool, pin, url + path, c, args.duration, args.warmup, proc,
                       args.max_wait)

    name = results_name("http_json", args.loop)
    payload = compare(f"HTTP small JSON: tensorwire vs bare aiohttp ({args.loop})", name, procs,
                      variants, run_case, args, pin, load,
                      extra={"check": lambda procs, path: check_same_answer(
                          {n: a for n, (_, a) in procs.items()}, path)})
    print_summary(payload)
    payload["targets"] = targets(payload)
    payload["loop"] = args.loop
    path = write_results(name, payload)
    print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
