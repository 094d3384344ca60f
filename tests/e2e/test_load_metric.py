"""The per-pod load metric the HPA scales on (docker/k8s/components/load-metric), as
`/metrics` exports it: one scrape of a pod sums every worker.

`tensorwire_requests_in_flight` (a live sum over the workers) is the load at the
scrape; the Prometheus adapter's rule rates `tensorwire_request_duration_seconds_sum`
(seconds spent in requests per second = requests in flight on average, Little's law),
which needs the sum to grow by each request's whole duration, from every worker.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

import tensorwire
from tensorwire.telemetry.metrics import DURATION, IN_FLIGHT
from tests.support.ops_http import sample, scrape, wait_for
from tests.support.servers import spawn_cli
from tests.support.two_workers import all_listening

pytestmark = pytest.mark.slow
HELD, SECONDS = 6, 3.0


def test_requests_in_flight_per_pod_across_workers():
    server = spawn_cli("tests.support.spread_service:Spread", "--workers", "2")
    try:
        all_listening(server)  # else the client's channels may all meet the first one
        before = sample(scrape(server.http_url), f"{DURATION._name}_sum", api="hold",
                        missing=0.0)  # no series before the first request
        pids: list[int] = []
        done = threading.Event()

        async def hold_all() -> None:
            async with tensorwire.AsyncClient(f"grpc://{server.grpc_target}") as client:
                answers = await asyncio.gather(*(client.hold(seconds=SECONDS)
                                                 for _ in range(HELD)))
            pids.extend(a["pid"] for a in answers)

        thread = threading.Thread(target=lambda: (asyncio.run(hold_all()), done.set()))
        thread.start()
        # while they are held: the pod's gauge counts all of them, whichever worker has
        # them (each worker's count reaches the shared files within 0.5 s)
        seen = []
        while not done.is_set() and HELD not in seen:
            seen.append(sample(scrape(server.http_url), IN_FLIGHT._name, api="hold",
                               missing=0.0))
        thread.join(30)
        assert done.is_set()
        assert HELD in seen, seen
        assert len(set(pids)) == 2  # both workers held some: the sum is across them

        def grown() -> float:
            after = sample(scrape(server.http_url), f"{DURATION._name}_sum", api="hold")
            return after - before

        # the rate the adapter takes: HELD requests x SECONDS each (each worker flushes
        # within 0.5 s; the margin is for a CI box busy with other tests' servers)
        wait_for(lambda: grown() >= HELD * SECONDS, timeout=15,
                 what="every hold's duration in the sum")
        assert grown() < HELD * (SECONDS + 1.0)
        wait_for(lambda: sample(scrape(server.http_url), IN_FLIGHT._name, api="hold") == 0,
                 timeout=15, what="the gauge back to 0")
    finally:
        server.stop()
