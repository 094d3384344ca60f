"""Where a client connects: one URL says the protocol, the address and TLS."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

_SCHEMES = {
    "http": ("http", False),
    "https": ("http", True),
    "grpc": ("grpc", False),
    "grpcs": ("grpc", True),
}
_DEFAULT_PORTS = {("http", False): 80, ("http", True): 443, ("grpc", False): 50051,
                  ("grpc", True): 443}


@dataclass(frozen=True)
class Target:
    """A parsed client URL: `http://h:p`, `https://h:p`, `grpc://h:p` or `grpcs://h:p`."""

    protocol: str  # "http" or "grpc"
    host: str
    port: int
    secure: bool
    #: A path prefix for HTTP (a service behind a reverse proxy at /svc), no trailing /.
    path: str = ""

    @property
    def base_url(self) -> str:
        """The HTTP base URL (routes are appended to it)."""
        scheme = "https" if self.secure else "http"
        netloc = self._netloc
        if self.port == (443 if self.secure else 80):
            netloc = netloc.rsplit(":", 1)[0]
        return f"{scheme}://{netloc}{self.path}"

    @property
    def grpc_target(self) -> str:
        """The `host:port` a gRPC channel dials."""
        return self._netloc

    @property
    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        if self.protocol == "http":
            return self.base_url
        return f"{'grpcs' if self.secure else 'grpc'}://{self._netloc}"


def parse_target(url: str) -> Target:
    """Parse a client URL; a bare `host:port` is refused (the scheme picks the protocol)."""
    if not isinstance(url, str):
        raise TypeError(f"the server URL must be a string, not {type(url).__name__}")
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(
            f"unsupported server URL {url!r}: use http://host:port or https://host:port "
            "for HTTP, grpc://host:port or grpcs://host:port for gRPC")
    protocol, secure = _SCHEMES[scheme]
    if not parts.hostname:
        raise ValueError(f"server URL {url!r} has no host")
    try:
        port = parts.port or _DEFAULT_PORTS[(protocol, secure)]
    except ValueError as exc:  # a port that is not a number
        raise ValueError(f"server URL {url!r}: {exc}") from None
    path = parts.path.rstrip("/")
    if protocol == "grpc" and path:
        raise ValueError(f"a gRPC URL has no path: {url!r}")
    return Target(protocol, parts.hostname, port, secure, path)
