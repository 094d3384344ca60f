"""`tensorwire serve --reload`: a change to the service's folder restarts the worker on
the same ports; a broken save waits for the next one."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.http_calls import post
from tests.support.servers import ROOT, spawn_cli

pytestmark = pytest.mark.slow

SERVICE = '''
import tensorwire


@tensorwire.service
class Dev:
    @tensorwire.api
    def version(self) -> str:
        return {answer!r}
'''


def answer(url: str) -> str | None:
    try:
        reply = post(url + "/version", {}, timeout=5)
    except OSError:
        return None  # between two workers
    return reply.text if reply.status == 200 else None  # a str output is text/plain


def wait_for(url: str, expected: str, server, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while answer(url) != expected:
        assert server.process.poll() is None, server.output()
        assert time.monotonic() < deadline, f"never answered {expected!r}:\n{server.output()}"
        time.sleep(0.2)


def announced(server, times: int) -> None:
    """Wait until the reloader has said where it serves `times` times: it logs that from
    its own thread once each worker listens (polling), so a save made the moment a worker
    answers could replace it before it was announced, and rightly unannounced."""
    serving = (f"serving dev_svc:Dev: HTTP on {server.http_url} (docs: "
               f"{server.http_url}/docs); gRPC on {server.grpc_target}")
    deadline = time.monotonic() + 30
    while server.output().count(serving) < times:
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.1)


def test_a_saved_change_restarts_the_worker_on_the_same_ports(tmp_path: Path):
    source = tmp_path / "dev_svc.py"
    source.write_text(SERVICE.format(answer="v1"))
    server = spawn_cli("dev_svc:Dev", "--reload", cwd=tmp_path, drain_output=True)
    try:
        assert answer(server.http_url) == "v1"
        announced(server, 1)
        source.write_text(SERVICE.format(answer="v2"))
        wait_for(server.http_url, "v2", server)
        announced(server, 2)
        source.write_text("def broken(:\n")  # a broken save: the loop goes on
        deadline = time.monotonic() + 90
        while "save a change to" not in server.output():
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        source.write_text(SERVICE.format(answer="v3"))
        wait_for(server.http_url, "v3", server)
        announced(server, 3)  # v1, v2, v3 on the same ports; the broken save never listened
    finally:
        server.stop()
    output = server.output()
    assert "dev_svc.py changed; restarting" in output
    assert "failed in import: SyntaxError" in output  # the broken save's own report
    assert server.process.returncode == 0
    # which worker each is
    assert "worker 1 ready" in output and "worker 2 ready" in output
    assert "worker ? ready" not in output


def test_reload_refuses_several_workers():
    out = subprocess.run([sys.executable, "-m", "tensorwire", "serve",
                          "examples.quickstart:Quickstart", "--reload", "--workers", "2"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert "--reload runs one worker" in out.stderr


def test_reload_without_watchfiles_says_which_extra():
    code = ("import sys; sys.modules['watchfiles'] = None\n"
            "from tensorwire.ops.cli import main\n"
            "sys.exit(main(['serve', 'examples.quickstart:Quickstart', '--reload']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert "pip install 'tensorwire[reload]'" in out.stderr
