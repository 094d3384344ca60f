"""A worker reads its settings line from the raw stdin, so that a model-control line
the supervisor wrote right behind it (another worker changed a service while this one's
interpreter was still starting) is followed, not swallowed by a buffered readline."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request

from tensorwire.ops import worker
from tensorwire.ops.supervisor import start_worker
from tensorwire.settings import Settings
from tests.support.servers import ROOT, free_ports


def test_the_settings_line_leaves_what_follows_it_to_the_watcher() -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b'{"settings": {}}\n{"control": "unload", "service": "A"}\n{"con')
        line, rest = worker.read_first_line(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert json.loads(line) == {"settings": {}}
    assert rest == b'{"control": "unload", "service": "A"}\n{"con'


def ready(port: int, model: str) -> bool | None:
    """The v2 model readiness (None: the worker does not answer yet)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{model}/ready",
                                    timeout=2) as reply:
            return reply.status == 200
    except urllib.error.HTTPError:
        return False
    except OSError:
        return None


def test_a_change_written_before_the_worker_read_its_settings_is_followed() -> None:
    http, grpc_port = free_ports(2)
    settings = Settings(service="tests.support.many_services:RowSums", http_port=http,
                        grpc_port=grpc_port, model_control="explicit",
                        log_level="warning", metrics=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = start_worker(settings, env)
    assert proc.stdin is not None
    # in the pipe before the new interpreter has read anything (it takes ~1 s to start)
    proc.stdin.write(b'{"control": "unload", "service": "RowSums"}\n')
    proc.stdin.flush()
    try:
        deadline = time.monotonic() + 60
        state = None
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the worker exited"
            state = ready(http, "shout")
            if state is False:
                break
            time.sleep(0.1)
        assert state is False  # unloaded, as the other worker did
    finally:
        proc.stdin.close()  # the supervisor gone: the worker drains and exits
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
