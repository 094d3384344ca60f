"""Bearer-token authentication, shared by both transports.

The HTTP middleware reads the `Authorization` header, the gRPC interceptor the
`authorization` metadata; both ask `BearerAuth.allows(value)`, which compares in
constant time (`hmac.compare_digest`). Refusals carry a fixed message: neither the
expected nor the offered token is ever echoed or logged.
"""

from __future__ import annotations

import hmac

from ..errors import Unauthenticated

#: Probes send no token. The Open Inference Protocol's health routes are KServe's probes.
HEALTH_PATHS = frozenset({"/livez", "/readyz", "/healthz", "/v2/health/live",
                          "/v2/health/ready"})
METRICS_PATH = "/metrics"
#: Swagger UI's page and its assets: open with auth, for they map nothing; the page asks
#: for the token before it fetches the OpenAPI document (see http.docs).
DOCS_PAGE_PATHS = frozenset({"/docs", "/docs/static/swagger-ui-bundle.js",
                             "/docs/static/swagger-ui.css", "/docs/static/favicon-32x32.png"})
#: The documents that map every API (OpenAPI, the client contract): they need the token
#: unless `auth_open_docs` opens them.
CONTRACT_PATHS = frozenset({"/docs.json", "/schema.json"})
GRPC_HEALTH_SERVICE = "grpc.health.v1.Health"


class BearerAuth:
    """The expected token of this server."""

    __slots__ = ("_token",)

    def __init__(self, token: str) -> None:
        self._token = token.strip().encode()

    def __repr__(self) -> str:  # never the token
        return "BearerAuth(<token>)"

    def allows(self, authorization: str | None) -> bool:
        if not authorization:
            return False
        scheme, _, offered = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(offered.strip().encode("utf-8", "replace"), self._token)

    @staticmethod
    def refusal() -> Unauthenticated:
        return Unauthenticated("missing or invalid bearer token",
                               headers={"WWW-Authenticate": 'Bearer realm="tensorwire"'})
