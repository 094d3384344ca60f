"""bench/RESULTS.md and bench/results/overview.png from the recorded results.

    .venv/bin/python bench/report.py

Reads whatever bench/results/*.json hold (each written by its own script, with the
machine, versions and command of that run) and writes one page of figures plus a PNG of
requests/s and p99 against concurrency for both protocols, tensorwire beside its bare
baseline. Nothing here measures: rerun a script to refresh its section. Failed calls
stand beside every requests/s figure, and a target reads "**missed** (N failed calls)"
whenever a call of the servers it compares failed (results recorded before failures
were counted show none).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support.common import RESULTS, ROOT, failed_calls, fmt, verdict

PAGE = ROOT / "bench" / "RESULTS.md"
PLOT = RESULTS / "overview.png"


def load(name: str) -> dict[str, Any] | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_line(result: dict[str, Any]) -> str:
    m = result.get("machine", {})
    v = m.get("versions", {})
    extra = ", ".join(f"{k} {v[k]}" for k in ("aiohttp", "grpcio", "protobuf", "pydantic",
                                               "wrk") if k in v)
    when = m.get("time", "")
    return (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; python "
            f"{v.get('python', m.get('python', '?'))}; {extra}; {when}").strip("; ")


def unary_section(title: str, result: dict[str, Any]) -> list[str]:
    cfg = result["config"]
    out = [f"## {title}", "",
           f"`{cfg['command']}` — {result['pinning']}; load: {result['load']}; "
           f"{cfg['rounds']} alternating rounds of {cfg['duration_s']:g} s per case.", "",
           f"Machine: {machine_line(result)}.", ""]
    rows = []
    for s in result["summary"]:
        tw, bare, r = s["tensorwire"], s["bare"], s["ratio"]
        rows.append([s["variant"], s["concurrency"], tw["rps"], failed_calls(tw), bare["rps"],
                     failed_calls(bare), f"{r['rps']:.2f}x", tw["p50_ms"], bare["p50_ms"],
                     tw["p99_ms"], bare["p99_ms"], f"{r['p99_ms']:.2f}x",
                     tw["server_us_per_req"], bare["server_us_per_req"]])
    out.append(md_table(["api", "clients", "tw rps", "tw failed", "bare rps", "bare failed",
                         "rps", "tw p50 ms", "bare p50 ms", "tw p99 ms", "bare p99 ms", "p99",
                         "tw CPU µs/req", "bare CPU µs/req"], rows))
    extra = [(s, other, side) for s in result["summary"]
             for other, side in s.get("extra", {}).items()]
    if extra:
        out += ["", "The extra line, in the same run: tensorwire on this loop against the "
                "bare baseline on asyncio's own loop (what installing uvloop buys over the "
                "framework as it comes).", ""]
        out.append(md_table(["api", "clients", "against", "its rps", "its failed", "rps",
                             "its p99 ms", "p99"],
                            [[s["variant"], s["concurrency"], other, side["rps"],
                              failed_calls(side), f"{side['ratio']['rps']:.2f}x",
                              side["p99_ms"], f"{side['ratio']['p99_ms']:.2f}x"]
                             for s, other, side in extra]))
    out += ["", *target_lines(result.get("targets", [])), ""]
    return out


def target_lines(targets: list[dict[str, Any]]) -> list[str]:
    lines = []
    for t in targets:
        failed = t.get("failed", 0)
        if "rps_ratio" in t:
            lines.append(f"- target {t['case']}: rps {t['rps_ratio']:.2f}x "
                         f"(≥ {t.get('rps_min', 0.8)}: "
                         f"{verdict(t['rps_met'], failed, '**missed**')}), p99 "
                         f"{t['p99_ratio']:.2f}x (≤ {t.get('p99_max', 1.3)}: "
                         f"{verdict(t['p99_met'], failed, '**missed**')}); "
                         f"{failed} failed calls")
        else:
            lines.append(f"- target {t['case']}: {t['value_s']:.3f} s (≤ {t['target_s']} s: "
                         f"{verdict(t['met'], failed, '**missed**')})")
    return lines


def streaming_section(result: dict[str, Any]) -> list[str]:
    first = result["protocols"][0]
    cfg = first["config"]
    out = ["## Streaming", "",
           f"`{cfg['command']}` — {first['tokens_per_stream']} chunks per stream; "
           f"{first['pinning']}; {cfg['rounds']} alternating rounds of "
           f"{cfg['duration_s']:g} s.", "", f"Machine: {machine_line(first)}.", ""]
    rows = []
    for payload in result["protocols"]:
        for s in payload["summary"]:
            tw, bare, r = s["tensorwire"], s["bare"], s["ratio"]
            rows.append([payload["protocol"], s["variant"], s["concurrency"],
                         tw["tokens_per_s"], failed_calls(tw), bare["tokens_per_s"],
                         failed_calls(bare), f"{r['tokens_per_s']:.2f}x", tw["ttfc_p50_ms"],
                         bare["ttfc_p50_ms"], tw.get("ttfc_mean_ms", float("nan")),
                         bare.get("ttfc_mean_ms", float("nan")), tw["ttfc_p99_ms"],
                         bare["ttfc_p99_ms"]])
    out.append(md_table(["protocol", "api", "streams", "tw chunks/s", "tw failed",
                         "bare chunks/s", "bare failed", "ratio", "tw TTFC p50 ms",
                         "bare TTFC p50 ms", "tw TTFC mean ms",
                         "bare TTFC mean ms", "tw TTFC p99 ms", "bare TTFC p99 ms"], rows))
    return [*out, ""]


def tensor_section(result: dict[str, Any]) -> list[str]:
    out = ["## Tensor round trip (float32 echo)", "", f"`{result.get('command', '')}`", "",
           f"Machine: {machine_line(result)}.", ""]
    first = next(iter(result["results"].values()), {})
    if "raw" not in first:  # a result from before the raw echo baseline
        return [*out, *_tensor_pairs(result), ""]
    out += ["MB/s against the raw socket echo of the same bytes (the box's limit), the "
            "server's CPU per payload MB, and the payload-sized buffers alive at the peak "
            "of one call (tracemalloc + pooled buffers; grpc core's own are not seen). "
            f"tensorwire on {result.get('loop', 'asyncio')}.", ""]
    rows = []
    failed = 0
    for size, r in result["results"].items():
        for wire in ("raw", "tensorwire_grpc", "bare_grpc", "tensorwire_npy",
                     "tensorwire_v2", "bare_http", "tensorwire_v2_grpc", "shm_http",
                     "shm_grpc", "tensorwire_json"):
            w = r.get(wire)
            if w is None:
                continue
            failed += w.get("errors", 0)
            rows.append([size, wire, w["mb_per_s"], f"{w.get('vs_raw', 1.0):.2f}x",
                         w["cpu_ms_per_mb"], f"{w.get('cpu_vs_raw', 1.0):.2f}x",
                         w.get("peak_buffers", "-"), w.get("errors", 0)])
    out.append(md_table(["size", "wire", "MB/s", "MB/s x raw", "CPU ms/MB", "CPU x raw",
                         "peak buffers", "failed calls"], rows))
    met = result.get("targets_met")
    if met:
        every = all(all(v.values()) for v in met.values())
        missed = {k: [n for n, ok in v.items() if not ok] for k, v in met.items()}
        shm = [f"{size} {wire}: {r[wire]['vs_socket']:.1f}x"
               for size, r in result["results"].items() for wire in ("shm_http", "shm_grpc")
               if "vs_socket" in r.get(wire, {})]
        out += ["", "- target (16 and 64 MiB, `.npy` and v2 binary): ≥ 0.5x raw MB/s, CPU "
                f"per MB ≤ 2x raw, ≤ 1 payload buffer per direction"
                f"{'; 64 MiB through shared memory ≥ 5x its socket path' if shm else ''}: "
                f"{verdict(every, failed, '**missed**')}{'' if every else f' {missed}'}"]
        if shm:
            out += [f"- shared memory (`shm_*`, input {result.get('shm_input', '?')}) "
                    f"over its socket path (v2 binary HTTP, v2 gRPC): {', '.join(shm)}"]
    return [*out, ""]


def _tensor_pairs(result: dict[str, Any]) -> list[str]:
    """The table of a result with tensorwire/bare pairs only (no raw echo)."""
    rows = []
    failed = 0
    for size, r in result["results"].items():
        row_failed = failed_calls(*(v for v in r.values() if isinstance(v, dict)))
        failed += row_failed
        rows.append([size, r["tensorwire_grpc"]["mb_per_s"], r["bare_grpc"]["mb_per_s"],
                     f"{r['ratio_grpc']:.2f}x", r["tensorwire_npy"]["mb_per_s"],
                     r["bare_http"]["mb_per_s"], f"{r['ratio_npy']:.2f}x",
                     r["tensorwire_json"]["mb_per_s"], f"{r['ratio_json']:.2f}x", row_failed])
    out = [md_table(["size", "tw gRPC MB/s", "bare gRPC MB/s", "gRPC", "tw npy MB/s",
                     "bare HTTP MB/s", "npy", "tw JSON MB/s", "JSON vs bare HTTP",
                     "failed calls"], rows)]
    met = result.get("targets_met")
    if met is not None:
        every = all(all(v.values()) for v in met.values())
        out += ["", f"- target gRPC and npy ≥ 0.7x bare at 16 and 64 MiB: "
                f"{verdict(every, failed, '**missed**')} {met}"]
    return out


def startup_section(result: dict[str, Any]) -> list[str]:
    s = result["summary"]
    metrics = ["http_ready_s", "grpc_serving_s", "both_ready_s", "rss_mib", "import_s"]
    out = ["## Start-up and memory (numpy-only service)", "",
           f"`{result['config']['command']}` — median of {result['config']['rounds']} "
           "alternating starts.", "", f"Machine: {machine_line(result)}.", ""]
    out.append(md_table(["", "HTTP /readyz s", "gRPC SERVING s", "both s", "RSS MiB",
                         "import s"],
                        [[n, *(s[n][m] for m in metrics)] for n in ("tensorwire", "bare")]))
    return [*out, "", *target_lines(result["targets"]), ""]


def batching_section(result: dict[str, Any]) -> list[str]:
    out = ["## Adaptive batching", "",
           f"Model: {result['model']}; {result['concurrency']} concurrent clients; "
           f"{result['machine'].get('pinning', '')}.", ""]
    rows = []
    for protocol, r in result["protocols"].items():
        m = r["median"]
        rows.append([protocol, m["lone_p50_ms"], m["unbatched_rps"],
                     m.get("unbatched_errors", "-"), m["unbatched_p99_ms"],
                     m["batched_rps"], m.get("batched_errors", "-"), m["batched_p99_ms"],
                     f"{m['throughput_ratio']:.1f}x",
                     f"{m['p99_vs_lone']:.1f}x", m.get("server_us_per_req", float("nan")),
                     m.get("mean_batch", float("nan")),
                     m.get("mean_queue_wait_ms", float("nan")),
                     m.get("latency_floor_ms", float("nan"))])
    out.append(md_table(["protocol", "lone p50 ms", "unbatched rps", "unbatched failed",
                         "unbatched p99 ms", "batched rps", "batched failed",
                         "batched p99 ms", "throughput", "p99 / lone",
                         "server µs/req", "mean batch", "mean queue wait ms",
                         "latency floor ms"], rows))
    out.append("")
    for protocol, r in result["protocols"].items():
        m = r["median"]
        out.append(f"- targets {protocol}: " + ", ".join(
            f"{name} {verdict(met, m.get('errors', 0), '**missed**')}"
            for name, met in m.get("targets_met", {}).items()))
    out += ["- targets: throughput ≥ 5x; batched p99 ≤ 3x the lone-request latency; "
            "batched p99 below unbatched p99; each met only with no failed call",
            "- latency floor: the larger of (clients x server CPU per request) on one core "
            "(Little's law: the protocol CPU's bound; the model sleeps) and the model's time "
            "for one full batch; no p99 can be below it"]
    return [*out, ""]


def real_model_section(result: dict[str, Any]) -> list[str]:
    cfg = result["config"]
    v = result["machine"].get("versions", {})
    # results from before `--runs` hold one run's summary at the top
    repeats = result.get("repeats") or [{"summary": result["summary"],
                                         "targets": result["targets"]}]
    bento = cfg.get("bentoml", True)
    names = ["tw-batched", "tw-unbatched", *(["bentoml"] if bento else [])]
    title = ("## A real model: the digits CNN, batched, unbatched and BentoML" if bento
             else "## A real model: the digits CNN, batched and unbatched (no BentoML)")
    against = ("and BentoML "
               f"{v.get('bentoml', '?')} (`{cfg['bentoml_install']}` in "
               f"`{cfg['bentoml_venv']}/`; HTTP: its 1.4 SDK, gRPC: its legacy Runner API) "
               f"with max batch {cfg['max_batch_size']} (BentoML max_latency_ms "
               f"{cfg['bentoml_latency_ms']})") if bento else (
               f"with max batch {cfg['max_batch_size']}")
    runs = len(repeats)
    out = [title, "",
           f"`{cfg['command']}` — {result['request']}; tensorwire batched "
           "(`examples.digits:Digits`), tensorwire unbatched "
           f"(`bench.support.real_model_service:DigitsUnbatched`) {against}; {result['pinning']}, "
           "one worker each, OMP_NUM_THREADS=1; load: HTTP "
           f"{result['load']['http']}, gRPC {result['load']['grpc']}; {cfg['rounds']} rounds "
           f"of {cfg['duration_s']:g} s per case, servers taking turns"
           + (f"; {runs} runs in a row, each with fresh servers." if runs > 1 else "."), "",
           f"Machine: {machine_line(result)}.", "",
           "Every server answered the held-out digits with offline inference's labels and "
           "probabilities (to 1e-6) before anything was measured.", ""]
    short = {"tw-batched": "batched", "tw-unbatched": "unbatched", "bentoml": "BentoML"}
    headers = ["run", "protocol", "clients"]
    for name in names:
        headers += [f"{short[name]} rps", f"{short[name]} failed"]
    headers += ["batched / unbatched", *(["batched / BentoML"] if bento else []),
                *(f"{short[n]} p50 ms" for n in names), *(f"{short[n]} p99 ms" for n in names),
                *(f"{short[n]} CPU µs/req" for n in names), "mean batch"]
    rows = []
    for k, rep in enumerate(repeats):
        for protocol, by_c in rep["summary"].items():
            for c, s in by_c.items():
                row: list[Any] = [k + 1, protocol, c]
                for name in names:
                    row += [s[name]["rps"], failed_calls(s[name])]
                row.append(f"{s['batched_vs_unbatched_rps']:.2f}x")
                if bento:
                    row.append(f"{s['batched_vs_bentoml_rps']:.1f}x")
                row += [s[n]["p50_ms"] for n in names] + [s[n]["p99_ms"] for n in names]
                row += [s[n]["server_us_per_req"] for n in names]
                rows.append([*row, s["tw-batched"].get("mean_batch", float("nan"))])
    out.append(md_table(headers, rows))
    out.append("")
    for g in result["targets"]:
        values = g.get("values", [g.get("value")])
        figure = ", ".join(f"{x:.2f}" for x in values)
        out.append(f"- target {g['protocol']}: {g['case']}"
                   + (", every run" if len(values) > 1 else "") + f": {figure} "
                   f"({verdict(g['met'], g.get('failed', 0), '**missed**')})")
    noise = sorted(s[name]["foreign_cpu"] for rep in repeats
                   for by_c in rep["summary"].values() for s in by_c.values()
                   for name in names
                   if s[name].get("foreign_cpu") == s[name].get("foreign_cpu"))
    if noise and noise[-1] >= 0.10:
        out.append(f"- other processes used {noise[len(noise) // 2]:.0%} of a core (median "
                   f"of cases; {noise[0]:.0%} to {noise[-1]:.0%}) beside these runs: the "
                   "servers took turns, so ratios compare like with like, but absolute "
                   "requests/s and latencies are those of a shared, busy machine")
    elif noise:
        out.append(f"- other processes used {noise[0]:.0%} to {noise[-1]:.0%} of a core "
                   "beside these runs: a quiet machine")
    return [*out, ""]


def plot(http: dict[str, Any] | None, grpc: dict[str, Any] | None) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = [(name, r) for name, r in (("HTTP small JSON", http), ("gRPC small unary", grpc))
              if r is not None]
    if not panels:
        return False
    fig, axes = plt.subplots(2, len(panels), figsize=(5.5 * len(panels), 7), squeeze=False)
    for col, (name, result) in enumerate(panels):
        for variant in sorted({s["variant"] for s in result["summary"]}):
            rows = sorted((s for s in result["summary"] if s["variant"] == variant),
                          key=lambda s: s["concurrency"])
            conc = [s["concurrency"] for s in rows]
            for side, style in (("tensorwire", "-o"), ("bare", "--s")):
                label = f"{side} ({variant})"
                axes[0][col].plot(conc, [s[side]["rps"] for s in rows], style, label=label)
                axes[1][col].plot(conc, [s[side]["p99_ms"] for s in rows], style, label=label)
        axes[0][col].set_title(f"{name}: requests/s")
        axes[1][col].set_title(f"{name}: p99 latency (ms)")
        for row in (0, 1):
            axes[row][col].set_xscale("log", base=2)
            axes[row][col].set_xlabel("concurrent clients")
            axes[row][col].grid(alpha=0.3)
            axes[row][col].legend(fontsize=8)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=90)
    return True


def main() -> int:
    http, grpc = load("http_json"), load("grpc_unary")
    page = ["# Benchmark results", "",
            "Generated by `bench/report.py` from `bench/results/*.json`; each section names "
            "the command that produced it (see `bench/README.md`). tensorwire and its bare "
            "baseline run in the same script, alternating, on the same machine; ratios are "
            "medians of per-round ratios.", ""]
    if plot(http, grpc):
        page += ["![requests/s and p99 against concurrency](results/overview.png)", ""]
    if http:
        page += unary_section("HTTP small JSON (tensorwire vs bare aiohttp + pydantic)", http)
    if grpc:
        page += unary_section("gRPC small unary (tensorwire vs bare grpc.aio servicer)", grpc)
    for name, title in (("http_json_uvloop", "HTTP small JSON on uvloop (tensorwire and bare "
                                             "aiohttp both on uvloop)"),
                        ("grpc_unary_uvloop", "gRPC small unary on uvloop (tensorwire and "
                                              "bare grpc.aio both on uvloop)")):
        result = load(name)
        if result:
            page += unary_section(title, result)
    for name, section in (("streaming", streaming_section),
                          ("tensor_roundtrip", tensor_section), ("startup", startup_section),
                          ("batching", batching_section),
                          ("real_model", real_model_section),
                          ("real_model_without_bentoml", real_model_section)):
        result = load(name)
        if result:
            page += section(result)
    hot = load("hot_path")
    if hot:
        page += ["## HTTP handler in process (no sockets)", "",
                 "`bench/hot_path.py` — what tensorwire's handler adds over the bare one.", ""]
        page.append(md_table(["handler", "µs/req", "added µs"],
                             [[k, v["us_per_req"], v["added_us"]]
                              for k, v in hot["summary"].items()]))
        page.append("")
    counted = load("instructions")
    if counted:
        page += ["## Instructions per request of the running server", "",
                 "`bench/instructions.py` — user-space instructions per small JSON request "
                 "under callgrind (system calls and cache misses are not in it).", ""]
        page.append(md_table(["server", "instructions/request"],
                             [[k, v["per_request"]] for k, v in counted["summary"].items()]))
        page += ["", f"tensorwire / bare: {counted['ratio']:.3f}", ""]
    streams = load("instructions_tokens")
    if streams:
        page += ["## Instructions per streamed chunk of the running server", "",
                 "`bench/instructions.py --api tokens --requests 400` — user-space "
                 "instructions per server-sent-event stream of 64 short chunks under "
                 "callgrind.", ""]
        page.append(md_table(["server", "instructions/stream", "instructions/chunk"],
                             [[k, v["per_request"], v["per_chunk"]]
                              for k, v in streams["summary"].items()]))
        page += ["", f"tensorwire / bare: {streams['ratio']:.3f}", ""]
    PAGE.write_text("\n".join(page))
    print(f"wrote {PAGE.relative_to(ROOT)}" + (f" and {PLOT.relative_to(ROOT)}"
                                                 if PLOT.exists() else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
