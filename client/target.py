"""Where a client connects: one URL says the protocol, the address and TLS.

Besides `http(s)://` and `grpc(s)://`, gRPC's own name syntax is accepted:
`dns:///host:port` (plaintext gRPC), and `dns://RESOLVER/host:port` to ask the DNS
server at RESOLVER instead of the system's. A name with several addresses, such as a
headless Kubernetes Service, is balanced over all of them (`tensorwire.client.channels`).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

_SCHEMES = {
    "http": ("http", False),
    "https": ("http", True),
    "grpc": ("grpc", False),
    "grpcs": ("grpc", True),
    "dns": ("grpc", False),
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
    #: gRPC's `dns:` form: the DNS server to ask ("" for the system's); None otherwise.
    resolver: str | None = None

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
        """What a gRPC channel dials: `host:port`, or `dns://RESOLVER/host:port`."""
        if self.resolver is not None:
            return f"dns://{self.resolver}/{self._netloc}"
        return self._netloc

    @property
    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        if self.protocol == "http":
            return self.base_url
        if self.resolver is not None:
            return self.grpc_target
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
            "for HTTP, grpc://host:port, grpcs://host:port or dns:///host:port for gRPC")
    protocol, secure = _SCHEMES[scheme]
    resolver = None
    if scheme == "dns":  # dns:[//RESOLVER]/host:port: the name is the path
        resolver = parts.netloc
        if not parts.path.lstrip("/"):
            raise ValueError(f"server URL {url!r} has no host: use dns:///host:port")
        parts = urlsplit("//" + parts.path.lstrip("/"))
    if not parts.hostname:
        raise ValueError(f"server URL {url!r} has no host")
    try:
        port = parts.port or _DEFAULT_PORTS[(protocol, secure)]
    except ValueError as exc:  # a port that is not a number
        raise ValueError(f"server URL {url!r}: {exc}") from None
    path = parts.path.rstrip("/")
    if protocol == "grpc" and path:
        raise ValueError(f"a gRPC URL has no path: {url!r}")
    return Target(protocol, parts.hostname, port, secure, path, resolver)
