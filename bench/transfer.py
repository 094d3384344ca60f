"""Batched device->host transfer vs one `.cpu()` per tensor, for 16 outputs of 4 MiB.

    .venv/bin/python bench/transfer.py [--tensors 16] [--mib 4] [--rounds 20]

Prints a table and writes bench/results/transfer.json. Needs CUDA; without it, it says
so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "transfer.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=16)
    parser.add_argument("--mib", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch not installed")
        return 0
    if not torch.cuda.is_available():
        print("CUDA not available")
        return 0
    from tensorwire.codecs import transfer

    n = int(args.mib * 1024 * 1024 // 4)
    outputs = [torch.randn(n, device="cuda") for _ in range(args.tensors)]
    torch.cuda.synchronize()

    def per_tensor() -> None:
        [t.cpu() for t in outputs]

    def batched() -> None:
        transfer.outputs_to_host(outputs, outputs)

    timings: dict[str, list[float]] = {"per_tensor_cpu": [], "batched_pinned": []}
    for fn in (per_tensor, batched):  # warm-up: allocator caches, pinned pool
        fn()
    for _ in range(args.rounds):  # alternate A B A B so drift hits both alike
        for name, fn in (("per_tensor_cpu", per_tensor), ("batched_pinned", batched)):
            torch.cuda.synchronize()
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    total = args.tensors * n * 4
    rows = {}
    for name, samples in timings.items():
        median = statistics.median(samples)
        rows[name] = {"median_ms": median * 1e3, "gb_per_s": total / median / 1e9}
    speedup = rows["per_tensor_cpu"]["median_ms"] / rows["batched_pinned"]["median_ms"]
    print(f"{args.tensors} tensors x {args.mib} MiB on {torch.cuda.get_device_name()}")
    print(f"{'method':<18}{'median ms':>12}{'GB/s':>10}")
    for name, row in rows.items():
        print(f"{name:<18}{row['median_ms']:>12.2f}{row['gb_per_s']:>10.2f}")
    print(f"batched speed-up: {speedup:.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"tensors": args.tensors, "mib": args.mib,
                                   "rounds": args.rounds, "device": torch.cuda.get_device_name(),
                                   "results": rows, "speedup": speedup}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
