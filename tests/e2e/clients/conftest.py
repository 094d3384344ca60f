"""Servers for the client tests: one per service class per module, started lazily."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers import RunningServer, start_in_thread


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[type, RunningServer]]:
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


def url_of(server: RunningServer, protocol: str) -> str:
    return server.http_url if protocol == "http" else f"grpc://{server.grpc_target}"
