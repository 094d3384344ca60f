"""BentoML 1.4's own clients (`bentoml.SyncHTTPClient`, `AsyncHTTPClient`) call
tensorwire servers and get what tensorwire's client gets.

bentoml (with torch, pandas and pillow, which its client needs for tensors, frames and
image files) is installed into a throwaway venv made by this test (cached under the pytest
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
from typing import Any

import pytest
from PIL import Image

import tensorwire
from examples.audio import AudioFiles
from examples.constrained import TextGenerator
from examples.descriptors import Retrieval
from examples.frames import Frames
from examples.images import ImageTools, draw_digit
from examples.iris import Iris
from examples.llm_stream import LanguageModel
from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from tests.e2e.test_files import mp3
from tests.support.cache import kept_dir

from .bentoml_calls import calls, norm
from .services import Kitchen

BENTOML = "bentoml>=1.4,<1.5"
#: What BentoML's client itself needs for tensors (torch-tensor), frames and image files;
#: torch pinned to the project's own (CPU) version, which pip finds in its cache.
EXTRAS = ("torch==2.13.0", "pandas", "pillow")
SCRIPT = Path(__file__).with_name("bentoml_script.py")
_OFFLINE = ("Failed to establish a new connection", "Name or service not known",
            "Temporary failure in name resolution", "Network is unreachable",
            "Connection refused", "ProxyError", "Max retries exceeded",
            "No matching distribution found", "Could not find a version")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
#: The example services BentoML could serve too, by the name bentoml_calls uses.
SERVICES = {s.__name__: s for s in (Quickstart, LanguageModel, TextGenerator, ReviewAnalyzer,
                                    Kitchen, AudioFiles, ImageTools, Iris, Retrieval, Frames)}


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
             BENTOML, *EXTRAS], capture_output=True, text=True, timeout=1500)
        if proc.returncode != 0:
            output = proc.stdout + proc.stderr
            if any(marker in output for marker in _OFFLINE):
                pytest.skip(f"the package registry is unreachable: {output.strip()[-300:]}")
            pytest.fail(f"pip install {BENTOML} failed:\n{output[-3000:]}")
        ready.write_text(" ".join((BENTOML, *EXTRAS)))
    return python


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """The files bentoml_calls.calls() names."""
    tmp = tmp_path_factory.mktemp("bentoml-inputs")
    (tmp / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (tmp / "song.mp3").write_bytes(mp3(10))
    (tmp / "a.txt").write_text("hello\n")
    Image.new("RGB", (40, 30), (10, 20, 30)).save(tmp / "photo.png", "PNG")
    draw_digit(7).convert("RGB").save(tmp / "seven.jpg", "JPEG")
    return tmp


def _tensorwire(servers, inputs: Path) -> dict[str, Any]:
    """What tensorwire's own client gets for the same calls, over HTTP."""
    out: dict[str, Any] = {}
    clients = {name: tensorwire.SyncClient(servers[s].http_url) for name, s in SERVICES.items()}
    try:
        for call in calls(inputs):
            client = clients[call.service]
            result = getattr(client, call.api)(*call.args, **call.kwargs)
            if next(a for a in client.list_apis() if a.name == call.api).stream:
                result = list(result)
            out[call.id] = norm(result)
    finally:
        for client in clients.values():
            client.close()
    return out


def test_bentoml_clients_get_what_tensorwires_client_gets(request, servers, inputs):
    """JSON, numpy and torch tensors, frames, files, images, root inputs and streams:
    BentoML's sync and async clients return the same values as tensorwire's."""
    key = hashlib.sha1(f"{BENTOML} {EXTRAS} {sys.version_info[:2]}".encode()).hexdigest()[:10]
    cache_dir = kept_dir(request, f"tensorwire-bentoml-{key}")
    python = _bentoml_venv(cache_dir)
    urls = {name: servers[service].http_url for name, service in SERVICES.items()}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["BENTOML_DO_NOT_TRACK"] = "True"
    proc = subprocess.run([str(python), str(SCRIPT), json.dumps(urls), str(inputs)],
                          capture_output=True, text=True, timeout=600, env=env,
                          cwd=inputs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["bentoml"].startswith("1.4")
    expected = _tensorwire(servers, inputs)
    sync_only = {c.id for c in calls(inputs) if c.sync_only}
    for client in ("sync", "async"):
        got = {k: v for k, v in out[client].items() if k != "errors"}
        assert set(got) == set(expected) - (sync_only if client == "async" else set())
        for call_id, value in got.items():
            assert value == expected[call_id], (client, call_id)
    # spot checks of what those values are
    assert expected["spell"] == [["str", "a"], ["str", "b"], ["str", "c"]]
    assert expected["complete"]["max_tokens"] == ["int", 300]
    assert expected["classify-torch"][:2] == ["ndarray", [1, 3]]
    assert expected["speak"][:2] == ["file", ".wav"]
    # errors keep the status and the server's message, and no internals
    errors = out["sync"]["errors"]
    assert errors["invalid"]["status"] == 400
    assert "max_words" in errors["invalid"]["text"]
    assert errors["internal"]["status"] == 500
    assert "db password" not in errors["internal"]["text"]
