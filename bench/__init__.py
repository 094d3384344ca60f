"""Side-by-side benchmarks: tensorwire against bare aiohttp / grpc.aio (see README.md)."""
