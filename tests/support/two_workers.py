"""Waiting for every worker of a `--workers N` server before a test deals connections.

The supervisor's server answers as soon as one worker is ready; a client that connects
before the others bind their SO_REUSEPORT sockets lands on that one worker, whatever the
code under test does.
"""

from __future__ import annotations

import grpc

import tensorwire
from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import wait_for
from tests.support.spread_service import Spread

SPEC = tensorwire.get_service_spec(Spread)


def worker_pid(target: str) -> int:
    """The worker that answers a call on a fresh connection."""
    caller = GrpcCaller(SPEC, target, channel=grpc.insecure_channel(
        target, options=[("grpc.use_local_subchannel_pool", 1)]))
    try:
        return caller.call("whoami", {}, timeout=30)["pid"]
    finally:
        caller.close()


def all_listening(server, workers: int = 2) -> set[int]:
    """Wait until `workers` workers take connections; their pids."""
    seen: set[int] = set()
    wait_for(lambda: seen.add(worker_pid(server.grpc_target)) or len(seen) == workers,
             timeout=60, what=f"{workers} workers listening")
    return seen
