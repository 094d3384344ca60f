"""What tensorwire relies on of aiohttp's internals, checked against the installed
release (`tensorwire.http.aiohttp_compat`): a release that drops one fails here, naming
it, rather than somewhere on the request path."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
from aiohttp import web

from tensorwire.http import aiohttp_compat
from tensorwire.http.aiohttp_compat import RELIANCES, ProtocolBase, missing

SERVER = Path(aiohttp_compat.__file__).resolve().parents[1]
#: Names tensorwire's own classes use for their own attributes too (a server's
#: `_runner`, a span tracer's `_server`): not searched for.
COMMON = {"_server", "_loop", "_runner", "_host", "_port", "_keep_alive"}
#: aiohttp's private names tensorwire may touch, and only in aiohttp_compat.py.
PRIVATE = {r.name for r in RELIANCES} - COMMON


def test_every_reliance_is_met_by_the_installed_aiohttp() -> None:
    assert missing() == [], (
        "aiohttp changed what tensorwire relies on; update tensorwire/http/"
        f"aiohttp_compat.py and the pin in pyproject.toml: {missing()}")


def test_a_missing_reliance_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a name aiohttp lacks is reported with what it is for."""
    fake = aiohttp_compat.Reliance("RequestHandler", "_gone_in_a_release", "a test")
    monkeypatch.setattr(aiohttp_compat, "RELIANCES", (*RELIANCES, fake))
    assert missing() == ["aiohttp RequestHandler._gone_in_a_release (a test)"]


def test_no_other_module_touches_aiohttp_internals() -> None:
    """The private names above appear as attributes only in aiohttp_compat.py."""
    offenders = []
    for path in sorted(SERVER.rglob("*.py")):
        if path.name == "aiohttp_compat.py":
            continue
        tree = ast.parse(path.read_text())
        aiohttp_module = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith(
            "aiohttp") for n in ast.walk(tree)) or "aiohttp" in path.read_text()
        if not aiohttp_module:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
                offenders.append(f"{path.relative_to(SERVER)}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("aiohttp"):
                offenders += [f"{path.relative_to(SERVER)}:{node.lineno} {a.name}"
                              for a in node.names if a.name.startswith("_")]
    assert offenders == []


def test_the_protocol_base_reads_aiohttp_s_state() -> None:
    """A live protocol: idle before a request, nothing pending, none served."""
    async def scenario() -> None:
        async def handler(request: web.BaseRequest) -> web.StreamResponse:
            return web.Response()

        protocol = ProtocolBase(web.Server(handler), loop=asyncio.get_running_loop())
        assert protocol.loop is asyncio.get_running_loop()
        assert list(protocol.pending) == []
        assert protocol.served == 0
        assert protocol.waiting() is False  # no waiter until the connection is made
        seen: list[object] = []
        protocol.set_dispatch(seen.append)
        assert protocol._request_handler == seen.append

    asyncio.run(scenario())


def test_pyproject_pins_the_tested_releases() -> None:
    text = (SERVER.parent / "pyproject.toml").read_text()
    assert f'"aiohttp{aiohttp_compat.TESTED}"' in text
