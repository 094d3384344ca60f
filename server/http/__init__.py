"""HTTP transport (aiohttp): moves bytes, calls codecs, knows no data types."""

from .app import create_app

__all__ = ["create_app"]
