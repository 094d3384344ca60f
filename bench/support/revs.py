"""Two tensorwire revisions side by side on the same load: before/after a hot-path change.

    .venv/bin/python bench/support/revs.py HEAD~1                 # HEAD~1 vs the working tree
    .venv/bin/python bench/support/revs.py main HEAD --protocol grpc

Each revision's package (server/, codecs/, proto/ mapped as in pyproject.toml) is
exported with `git archive` into a temp dir and put first on PYTHONPATH of its own
`tensorwire serve bench.support.services:Bench`; the working tree is served from the editable
install. Same layout as the other comparisons (pinned cores, alternating rounds,
median ratios); the ratio column is after/before.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.http_json import (
    VARIANTS,
    compare,
    load_tool,
    measure,
    parse_args,
    print_summary,
)
from bench.support.common import PY, ROOT, Pinning, Proc, free_port

#: pyproject.toml [tool.setuptools.package-dir]: package -> folder in the repository.
PACKAGE_DIRS = {"tensorwire": "server", "tensorwire/codecs": "codecs",
                "tensorwire/client": "client", "tensorwire/v1": "proto/tensorwire/v1",
                "tensorwire/inference": "proto/inference"}


def export(rev: str) -> Path:
    """The importable package of `rev`, in a fresh temp dir (returned: its sys.path entry)."""
    root = Path(tempfile.mkdtemp(prefix=f"tensorwire-rev-{rev.replace('/', '_')}-"))
    src = root / "src"
    src.mkdir()
    archive = subprocess.run(["git", "archive", rev, *sorted(set(
        folder.split("/")[0] for folder in PACKAGE_DIRS.values()))], cwd=ROOT,
        capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    pkg = root / "pkg"
    for package, folder in PACKAGE_DIRS.items():
        shutil.copytree(src / folder, pkg / package, dirs_exist_ok=True)
    return pkg


def server(name: str, pin: Pinning, rev: str, protocol: str) -> tuple[Proc, str]:
    env = {} if rev == "." else {"PYTHONPATH": f"{export(rev)}:{ROOT}"}
    port = free_port()
    flags = (["--http-port", str(port), "--no-grpc"] if protocol == "http"
             else ["--grpc-port", str(port), "--no-http"])
    proc = Proc(name, [*pin.prefix("server"), PY, "-m", "tensorwire", "serve",
                       "bench.support.services:Bench", *flags], env=env)
    addr = f"http://127.0.0.1:{port}" if protocol == "http" else f"127.0.0.1:{port}"
    return proc, addr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("before")
    parser.add_argument("after", nargs="?", default=".", help="a revision, or . (working tree)")
    parser.add_argument("--protocol", choices=["http", "grpc"], default="http")
    known, rest = parser.parse_known_args(argv)
    args = parse_args([*rest, *([] if "--variants" in rest else ["--variants", "async"]),
                       *([] if "--concurrency" in rest else ["--concurrency", "16,64"]),
                       *([] if "--rounds" in rest else ["--rounds", "5"]),
                       *([] if "--duration" in rest else ["--duration", "3"])])
    pin = Pinning.detect()
    procs = {"after": server("after", pin, known.after, known.protocol),
             "before": server("before", pin, known.before, known.protocol)}
    title = f"tensorwire {known.after} (after) vs {known.before} (before), {known.protocol}"
    if known.protocol == "http":
        tool = load_tool(args.load)
        variants = {v: VARIANTS[v] for v in args.variants}

        def run_case(proc: Proc, url: str, path: str, c: int) -> dict[str, Any]:
            return measure(tool, pin, url + path, c, args.duration, args.warmup, proc,
                           args.max_wait)

        load = f"{tool} (own process)"
    else:
        from bench.grpc_unary import REQUEST, measure_grpc
        from bench.grpc_unary import VARIANTS as GRPC_VARIANTS
        from bench.support.baselines.stubs import compile_stubs, load_stubs

        pb, _ = load_stubs(compile_stubs(tempfile.mkdtemp(prefix="tensorwire-bench-stubs-")))
        request = pb.PredictRequest(**REQUEST).SerializeToString()
        variants = {v: GRPC_VARIANTS[v] for v in args.variants}

        def run_case(proc: Proc, target: str, method: str, c: int) -> dict[str, Any]:
            return measure_grpc(pin, target, method, request, c, args.duration,
                                args.warmup, proc, args.max_wait)

        load = "bench.support.load.grpc_client (own process)"
    payload = compare(title, "revs", procs, variants, run_case, args, pin, load)
    print_summary(payload, names=("after", "before"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
