"""A change another worker made (model control), told while this worker is still
starting, is made once it has started: made mid-start, the start's own loading of its
services undid it (a worker that came up under load kept serving an unloaded model)."""

from __future__ import annotations

import asyncio

import tensorwire
from tensorwire.ops.serve import Server
from tensorwire.runtime.hosted import Placement
from tensorwire.settings import Settings
from tests.support.many_services import Flowers, RowSums


def test_a_change_told_during_start_is_made_after_it() -> None:
    async def scenario() -> tuple[bool, bool]:
        services = [(tensorwire.get_service_spec(Flowers), Placement()),
                    (tensorwire.get_service_spec(RowSums), Placement())]
        settings = Settings(http_port=0, grpc_port=0, model_control="explicit",
                            graceful_timeout=1.0)
        server = Server(services, settings)
        flowers = server.services[0]
        server.follow("unload", flowers.name)  # told before the start loaded it
        await server.start()
        try:
            for _ in range(200):  # the queued change runs as a task of the loop
                if not flowers.ready:
                    break
                await asyncio.sleep(0.01)
            return flowers.ready, server.services[1].ready
        finally:
            await server.stop()

    flowers_ready, rows_ready = asyncio.run(scenario())
    assert flowers_ready is False  # unloaded, as the other worker did
    assert rows_ready is True      # the other service untouched
