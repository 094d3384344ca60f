"""`python -m tensorwire.ops.probe` (the container's HEALTHCHECK), run by hand: one line
saying ready, or why not."""

from __future__ import annotations

import os
import subprocess
import sys

from examples.quickstart import Quickstart
from tests.support.servers import ROOT, free_ports, serving


def probe(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TENSORWIRE_")}
    return subprocess.run([sys.executable, "-m", "tensorwire.ops.probe"], cwd=ROOT,
                          env={**clean, **env}, capture_output=True, text=True, timeout=60)


def test_no_server_says_where_it_looked_and_what_it_reads():
    http, _ = free_ports(2)
    done = probe(TENSORWIRE_HTTP_PORT=str(http))
    assert done.returncode == 1
    assert f"not ready: http://127.0.0.1:{http}/readyz: Connection refused" in done.stderr
    assert "not the flags of tensorwire serve" in done.stderr


def test_a_ready_server_says_so_on_both_protocols():
    with serving(Quickstart) as server:
        done = probe(TENSORWIRE_HTTP_PORT=str(server.http_port))
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"tensorwire.ops.probe: ready: {server.http_url}/readyz\n"
        done = probe(TENSORWIRE_HTTP="false", TENSORWIRE_GRPC_PORT=str(server.grpc_port))
        assert done.returncode == 0, done.stderr
        assert "ready: gRPC health on" in done.stdout


def test_a_refusal_is_named():
    with serving(Quickstart, auth_token="t0ken", auth_open_health=False) as server:
        done = probe(TENSORWIRE_HTTP_PORT=str(server.http_port))
        assert done.returncode == 1
        assert "/readyz answered 401" in done.stderr
        done = probe(TENSORWIRE_HTTP_PORT=str(server.http_port), TENSORWIRE_AUTH_TOKEN="t0ken",
                     TENSORWIRE_AUTH_OPEN_HEALTH="false")
        assert done.returncode == 0, done.stderr
