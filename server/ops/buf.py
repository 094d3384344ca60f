"""`buf breaking`, the protobuf world's standard compatibility check, run on two trees.

buf ships on PyPI as `buf-bin` (the `contract` extra, and dev); it works offline and
compares two `.proto` trees in a fraction of a second. The rules are `WIRE_JSON`
(what breaks the binary wire or proto3's JSON mapping: renumbered, retyped or deleted
fields and enum values) plus `RPC_NO_DELETE`, which `WIRE_JSON` leaves out although a
deleted rpc breaks every client that calls it. buf's configuration is passed inline,
so no `buf.yaml` has to be published with the contract.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

RULES = ("WIRE_JSON", "RPC_NO_DELETE")
INSTALL_HINT = ("buf is not installed, so the .proto was not checked with `buf breaking`: "
                "pip install 'tensorwire[contract]' (the buf-bin package)")
#: buf's exit status when it found breaking changes (or could not compile a file).
_FOUND = 100


class BufError(RuntimeError):
    """buf could not run or could not read a tree; the message says why."""


@dataclass(frozen=True)
class Annotation:
    """One finding of `buf breaking --error-format json`."""

    path: str
    line: int
    rule: str
    message: str


def find_buf() -> str | None:
    """The buf executable: the one installed beside this Python (a venv's bin/, where
    buf-bin puts it even when the venv is not activated), else one on PATH."""
    beside = Path(sys.executable).parent / "buf"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("buf")


def breaking(buf: str, tree: Path, against: Path, timeout: float = 120.0
             ) -> list[Annotation]:
    """buf's breaking changes of `tree` against `against` (two folders of .proto files
    rooted like their imports)."""
    config = json.dumps({"version": "v2", "breaking": {"use": list(RULES)}})
    with tempfile.TemporaryDirectory(prefix="tensorwire-buf-") as cache:
        # A v2 config given inline describes the module at the working directory.
        cmd = [buf, "breaking", ".", "--against", str(against.resolve()),
               "--config", config, "--against-config", config, "--error-format", "json"]
        try:
            done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True,
                                  timeout=timeout, env={**os.environ, "BUF_CACHE_DIR": cache})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BufError(f"cannot run {buf}: {exc}") from None
    if done.returncode not in (0, _FOUND):
        raise BufError(f"buf breaking failed (exit {done.returncode}): "
                       f"{(done.stderr or done.stdout).strip()}")
    found = []
    for line in done.stdout.splitlines():
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise BufError(f"unexpected output of buf breaking: {line}") from None
        found.append(Annotation(item.get("path", ""), int(item.get("start_line", 0)),
                                item.get("type", ""), item.get("message", "")))
    compile_errors = [a for a in found if a.rule == "COMPILE"]
    if compile_errors:
        raise BufError("buf cannot compile the contract: " + "; ".join(
            f"{a.path}:{a.line}: {a.message}" for a in compile_errors))
    if done.returncode == _FOUND and not found:
        raise BufError(f"buf breaking failed: {(done.stderr or done.stdout).strip()}")
    return found
