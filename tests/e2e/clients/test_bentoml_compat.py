"""BentoML 1.4's own client (`bentoml.SyncHTTPClient`) calls a tensorwire server.

bentoml is installed into a throwaway venv made by this test (cached under the pytest
cache, keyed by the version range), never into the project's venv; the test is skipped
only when the package registry cannot be reached.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from tests.support.cache import kept_dir

from .services import Kitchen

BENTOML = "bentoml>=1.4,<1.5"
SCRIPT = Path(__file__).with_name("bentoml_script.py")
_OFFLINE = ("Failed to establish a new connection", "Name or service not known",
            "Temporary failure in name resolution", "Network is unreachable",
            "Connection refused", "ProxyError", "Max retries exceeded",
            "No matching distribution found", "Could not find a version")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _bentoml_venv(cache_dir: Path) -> Path:
    """A venv with bentoml 1.4 (built once; concurrent workers wait on a lock)."""
    venv = cache_dir / "venv"
    python = venv / "bin" / "python"
    ready = cache_dir / "ready"
    with open(cache_dir / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists() and python.exists():
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        proc = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
             BENTOML], capture_output=True, text=True, timeout=1100)
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            if any(marker in output for marker in _OFFLINE):
                pytest.skip(f"the package registry is unreachable: {output.strip()[-300:]}")
            pytest.fail(f"pip install {BENTOML} failed:\n{output[-3000:]}")
        ready.write_text(BENTOML)
    return python


def test_bentoml_sync_client_calls_json_file_and_root_input_apis(request, servers, tmp_path):
    key = hashlib.sha1(f"{BENTOML} {sys.version_info[:2]}".encode()).hexdigest()[:10]
    cache_dir = kept_dir(request, f"tensorwire-bentoml-{key}")
    python = _bentoml_venv(cache_dir)
    urls = [servers[s].http_url for s in (Quickstart, ReviewAnalyzer, Kitchen)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["BENTOML_DO_NOT_TRACK"] = "True"
    proc = subprocess.run([str(python), str(SCRIPT), *urls, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, env=env,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["bentoml"].startswith("1.4")
    # JSON inputs and outputs
    assert out["summarize"] == {"summary": "a b", "words": 4}
    assert out["analyze"] == {"sentiment": "positive", "score": 1.0, "words": 2, "tags": {}}
    assert out["search"] == ["red shoes"]
    # root inputs: a text/plain body, a JSON array body, a file body
    assert out["upper"] == "ROOT INPUT"
    assert out["stats"] == {"min": 1.0, "max": 3.0, "mean": 2.0}
    assert out["raw_size"] == 1024
    # file inputs: multipart with the file as a part, other fields as form fields
    blob = bytes(range(256)) * 4
    sha1 = hashlib.sha1(blob).hexdigest()
    assert out["digest_path"] == {"label": "from a path", "size": 1024, "sha1": sha1}
    assert out["digest_default"] == {"label": "x", "size": 1024, "sha1": sha1}
    # errors keep the status and the server's message
    assert out["error"]["status"] == 400
    assert "max_words" in out["error"]["text"]
