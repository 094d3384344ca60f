"""Shared e2e fixtures: one real server per example service per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import RunningServer, start_in_thread


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[type, RunningServer]]:
    """Lazily started servers, keyed by service class, stopped at module end."""
    started: dict[type, RunningServer] = {}

    class Pool(dict):
        def __missing__(self, service: type) -> RunningServer:
            server = start_in_thread(service)
            started[service] = server
            self[service] = server
            return server

    yield Pool()
    for server in started.values():
        server.stop()
