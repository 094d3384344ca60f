"""Compile bare.proto with grpc_tools.protoc into a temp dir (generated code is never
committed) and import the modules from there."""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path
from types import ModuleType

PROTO = Path(__file__).with_name("bare.proto")


def compile_stubs(out_dir: str | Path | None = None) -> Path:
    """Run protoc on bare.proto; returns the directory holding bare_pb2*.py."""
    from grpc_tools import protoc

    out = Path(out_dir or tempfile.mkdtemp(prefix="tensorwire-bench-stubs-"))
    out.mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).parent / "_proto")
    rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO.parent}", f"-I{include}",
                      f"--python_out={out}", f"--grpc_python_out={out}", str(PROTO)])
    if rc != 0:
        raise RuntimeError(f"protoc failed on {PROTO} (exit {rc})")
    return out


def load_stubs(stub_dir: str | Path) -> tuple[ModuleType, ModuleType]:
    """(bare_pb2, bare_pb2_grpc) from a directory made by `compile_stubs`."""
    path = str(stub_dir)
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module("bare_pb2"), importlib.import_module("bare_pb2_grpc")
