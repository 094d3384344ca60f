"""protoc (from grpcio-tools, in the dev extra), with the well-known types on its path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def protoc(*args: str) -> subprocess.CompletedProcess[str]:
    """grpc_tools' protoc in a subprocess: in-process it can crash a worker that has
    loaded TensorFlow (which bundles its own protobuf)."""
    import grpc_tools  # the dev extra; imported here so that importing this module is free

    include = str(Path(grpc_tools.__file__).parent / "_proto")
    return subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{include}", *args],
                          capture_output=True, text=True, timeout=60)
