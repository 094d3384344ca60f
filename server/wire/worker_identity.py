"""Which worker process holds a gRPC connection: told to clients that want to spread.

A tensorwire server answers `grpc.health.v1.Health/Check` with two initial-metadata
entries: `tensorwire-worker`, a random id of the worker process that holds the
connection (random, not the pid: it tells a client nothing about the host), and
`tensorwire-workers`, how many workers share the port. tensorwire's client asks once per
connection and puts an equal share of its calls on each worker it holds a connection
to, however the kernel dealt its connections (`tensorwire.client.channels`).
"""

from __future__ import annotations

WORKER_HEADER = "tensorwire-worker"
WORKERS_HEADER = "tensorwire-workers"
