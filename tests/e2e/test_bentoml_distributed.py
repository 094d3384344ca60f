"""BentoML's "Run distributed Services" example (examples/bentoml_distributed.py) runs with
only the import renamed: tensorwire serves it (the dependency in-process, or over gRPC
in another server), and BentoML 1.4 serves the very same file with `tensorwire`
renamed `bentoml`, with the same answers."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
import typing as t
import urllib.request
from pathlib import Path

import orjson
import pytest

import tensorwire
from examples.bentoml_distributed import IrisClassifier, Preprocessing
from tests.support.cache import kept_dir
from tests.support.http_calls import post
from tests.support.servers import ROOT, free_port, serving

SOURCE = ROOT / "examples" / "bentoml_distributed.py"
ROWS = [[5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3], [5.9, 3.0, 4.2, 1.5], [4.9, 3.1, 1.5, 0.1]]
EXPECTED = [0, 2, 1, 0]


def test_tensorwire_serves_it_with_the_dependency_in_process() -> None:
    with serving(IrisClassifier) as server:
        answer = post(f"{server.http_url}/classify", {"input_series": ROWS})
        assert (answer.status, answer.json()) == (200, EXPECTED)
        with tensorwire.SyncClient(f"grpc://{server.grpc_target}") as client:
            assert client.classify(input_series=ROWS).tolist() == EXPECTED


def test_tensorwire_serves_it_with_the_dependency_elsewhere() -> None:
    with serving(Preprocessing) as pre, serving(
            IrisClassifier, dependencies=[f"Preprocessing=grpc://{pre.grpc_target}"]) as server:
        assert post(f"{server.http_url}/classify", {"input_series": ROWS}).json() == EXPECTED


def renamed() -> str:
    """The example as BentoML code: `tensorwire` renamed `bentoml`, nothing else."""
    source = SOURCE.read_text()
    code = source[source.index('"""', 3) + 3:]  # past the module docstring, which tells
    assert "bentoml" not in code  # so the rename is all there is between the two
    return source.replace("tensorwire", "bentoml")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_bentoml_serves_the_same_file_renamed(request: pytest.FixtureRequest,
                                              tmp_path: Path) -> None:
    from tests.e2e.clients.test_bentoml_compat import BENTOML, EXTRAS, _bentoml_venv

    key = hashlib.sha1(f"{BENTOML} {EXTRAS} {sys.version_info[:2]}".encode()).hexdigest()[:10]
    python = _bentoml_venv(kept_dir(request, f"tensorwire-bentoml-{key}"))
    (tmp_path / "service.py").write_text(renamed())
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(BENTOML_DO_NOT_TRACK="True", BENTOML_HOME=str(tmp_path / "home"))
    proc = subprocess.Popen([str(python.with_name("bentoml")), "serve",
                             "service:IrisClassifier", "--port", str(port)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        answer = _classify_when_ready(f"http://127.0.0.1:{port}", proc)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert answer == EXPECTED


def _classify_when_ready(url: str, proc: subprocess.Popen[str]) -> t.Any:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"bentoml serve exited: {proc.stdout.read()[-3000:]}")  # type: ignore[union-attr]
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=2) as ready:
                if ready.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    body = orjson.dumps({"input_series": ROWS})
    call = urllib.request.Request(f"{url}/classify", data=body,
                                  headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(call, timeout=30) as answer:
        return orjson.loads(answer.read())
