"""BentoML's @service options applied by `tensorwire serve`, under explicit settings."""

from __future__ import annotations

import pytest

from tests.support.http_calls import post
from tests.support.servers import spawn_cli

pytestmark = pytest.mark.slow

TARGET = "tests.support.options_service:Configured"


def test_service_options_apply_and_the_ignored_ones_are_named():
    server = spawn_cli(TARGET, drain_output=True)
    try:
        assert post(server.http_url + "/sleep", {"seconds": 0.0}).status == 200
        late = post(server.http_url + "/sleep", {"seconds": 3.0})
        assert late.status == 504, late.text  # traffic.timeout = 0.5 s
        assert post(server.http_url + "/metrics", method="GET").status == 404
    finally:
        server.stop()
    lines = server.output().splitlines()
    warned = [li.split("@service option ", 1)[1] for li in lines if "@service option" in li]
    assert sorted(w.split(" ")[0] for w in warned) == ["resources", "traffic.concurrency"]
    assert all(" WARNING " in li for li in lines if "@service option" in li)


def test_explicit_settings_win_over_service_options():
    server = spawn_cli(TARGET, "--request-timeout", "10", "--metrics",
                       env={"TENSORWIRE_MAX_CONCURRENCY": "2"}, drain_output=True)
    try:
        assert post(server.http_url + "/sleep", {"seconds": 1.0}).status == 200
        assert post(server.http_url + "/metrics", method="GET").status == 200
    finally:
        server.stop()
