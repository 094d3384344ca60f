"""gRPC transport (grpc.aio): moves bytes, calls codecs, knows no data types."""

from .server import GrpcServer

__all__ = ["GrpcServer"]
