"""Clients of tensorwire services: `SyncClient` and `AsyncClient`, over HTTP or gRPC.

Both discover the service's APIs on connect and expose each as a method named like the
API; inputs are encoded and outputs decoded by the server's contract. Errors are the
classes of `tensorwire.errors`, the same for both protocols. See `asyncclient` and
`syncclient` for the details (options, thread-safety, streams).
"""

from .api import APIInfo
from .asyncclient import AsyncClient
from .streams import AsyncStream, SyncStream
from .syncclient import SyncClient

__all__ = ["APIInfo", "AsyncClient", "AsyncStream", "SyncClient", "SyncStream"]
