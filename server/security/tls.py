"""TLS for both protocols from one PEM certificate (chain) and key.

Files are read once at start-up; a missing or unreadable file fails start-up with the
setting's name rather than serving plaintext.
"""

from __future__ import annotations

import ssl
from typing import Any

import grpc

from ..settings import Settings


def _read(path: str, setting: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise OSError(f"{setting} {path}: {exc.strerror or exc}") from None


def http_context(settings: Settings) -> ssl.SSLContext | None:
    """The aiohttp server's SSL context (TLS 1.2+), or None without TLS."""
    if not settings.tls:
        return None
    assert settings.tls_cert and settings.tls_key
    _read(settings.tls_cert, "tls_cert")  # a clear message before ssl's terse one
    _read(settings.tls_key, "tls_key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except ssl.SSLError as exc:
        raise OSError(f"tls_cert/tls_key: cannot load the certificate and key: {exc}") \
            from None
    return context


def grpc_credentials(settings: Settings) -> Any:
    """grpc ServerCredentials for `add_secure_port`, or None without TLS."""
    if not settings.tls:
        return None
    assert settings.tls_cert and settings.tls_key
    cert = _read(settings.tls_cert, "tls_cert")
    key = _read(settings.tls_key, "tls_key")
    return grpc.ssl_server_credentials([(key, cert)])
