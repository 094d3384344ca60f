"""https:// and grpcs:// with a private CA (`root_certificates=`), against TLS servers.

The server side here is the real gRPC transport on a secure port and an aiohttp app on
a TLS socket serving the real HTTP app, since `tensorwire serve` has no TLS flags yet.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

import tensorwire
from examples.quickstart import Quickstart
from tensorwire.errors import ServerUnreachable

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return key, cert


async def _tls_servers(key: Path, cert: Path):
    import grpc
    from aiohttp import web

    from tensorwire.grpc import GrpcServer
    from tensorwire.http import create_app
    from tensorwire.runtime.service import ServiceRuntime
    from tensorwire.settings import Settings

    runtime = ServiceRuntime(tensorwire.get_service_spec(Quickstart), Settings())
    await runtime.start()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    runner = web.AppRunner(create_app(runtime))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    http_port = site._server.sockets[0].getsockname()[1]
    server = GrpcServer(runtime)
    credentials = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
    grpc_port = server.server.add_secure_port("127.0.0.1:0", credentials)
    await server.start()
    await server.set_serving(True)

    async def stop() -> None:
        await server.stop(0)
        await runner.cleanup()
        await runtime.close()

    return http_port, grpc_port, stop


def test_https_and_grpcs_with_a_private_ca(certificate):
    key, cert = certificate

    async def main() -> None:
        http_port, grpc_port, stop = await _tls_servers(key, cert)
        try:
            for url in (f"https://localhost:{http_port}", f"grpcs://localhost:{grpc_port}"):
                async with tensorwire.AsyncClient(url, root_certificates=cert) as client:
                    assert await client.upper("secure") == "SECURE"
                    assert await client.is_ready()
                with pytest.raises(ServerUnreachable):  # the CA is not trusted by default
                    await tensorwire.AsyncClient.connect(url, connect_timeout=3)
        finally:
            await stop()

    asyncio.run(main())
