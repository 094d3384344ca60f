"""URL parsing and how a call's arguments bind to an API's inputs."""

from __future__ import annotations

import pytest

from tensorwire.client.api import RemoteAPI, RemoteField
from tensorwire.client.target import parse_target


@pytest.mark.parametrize(("url", "protocol", "host", "port", "secure", "base"), [
    ("http://localhost:3000", "http", "localhost", 3000, False, "http://localhost:3000"),
    ("https://api.example.com", "http", "api.example.com", 443, True,
     "https://api.example.com"),
    ("http://h:1/prefix/", "http", "h", 1, False, "http://h:1/prefix"),
    ("grpc://127.0.0.1:50051", "grpc", "127.0.0.1", 50051, False, None),
    ("grpcs://svc", "grpc", "svc", 443, True, None),
    ("GRPC://[::1]:7", "grpc", "::1", 7, False, None),
])
def test_urls(url, protocol, host, port, secure, base):
    t = parse_target(url)
    assert (t.protocol, t.host, t.port, t.secure) == (protocol, host, port, secure)
    if base:
        assert t.base_url == base
    else:
        assert t.grpc_target == (f"[{host}]:{port}" if ":" in host else f"{host}:{port}")


@pytest.mark.parametrize(("url", "dialed", "shown"), [
    ("dns:///svc.ns.svc.cluster.local:50051", "dns:///svc.ns.svc.cluster.local:50051",
     "dns:///svc.ns.svc.cluster.local:50051"),
    ("dns:///svc", "dns:///svc:50051", "dns:///svc:50051"),
    ("dns://10.0.0.10:53/svc:7", "dns://10.0.0.10:53/svc:7", "dns://10.0.0.10:53/svc:7"),
    ("DNS:///[::1]:7", "dns:///[::1]:7", "dns:///[::1]:7"),
])
def test_grpc_dns_names(url, dialed, shown):
    """gRPC's own `dns:` names: plaintext gRPC, the channel dials the name as given (an
    authority is the DNS server to ask), so every address of the name is balanced."""
    t = parse_target(url)
    assert (t.protocol, t.secure) == ("grpc", False)
    assert t.grpc_target == dialed
    assert str(t) == shown


@pytest.mark.parametrize("url", ["localhost:3000", "tcp://x:1", "http://", "grpc://h:1/x",
                                 "http://h:notaport", "dns:///", "dns://1.1.1.1/"])
def test_bad_urls(url):
    with pytest.raises(ValueError):
        parse_target(url)


def _api(names, root=False):
    return RemoteAPI(name="f", doc=None, fields=[RemoteField(n, None, "") for n in names],
                     root=root, stream=False, output=None, output_summary="", address="/f")


def test_keyword_binding():
    api = _api(["a", "b"])
    assert api.bind((1,), {"b": 2}) == {"a": 1, "b": 2}
    assert api.bind((), {"b": None}) == {}  # None: not given, the server's default applies
    with pytest.raises(TypeError, match="unexpected input 'c'; it takes: a, b"):
        api.bind((), {"c": 1})
    with pytest.raises(TypeError, match="at most 2 positional"):
        api.bind((1, 2, 3), {})
    with pytest.raises(TypeError, match="'a' twice"):
        api.bind((1,), {"a": 1})


def test_root_binding_names_the_rule():
    api = _api(["image"], root=True)
    assert api.bind(("x",), {}) == {"image": "x"}
    assert api.bind((), {}) == {}
    with pytest.raises(TypeError) as info:
        api.bind((), {"image": "x"})
    message = str(info.value)
    assert "root input 'image'" in message and "positional" in message
    assert "f(value), not f(image=...)" in message
    with pytest.raises(TypeError, match="one root input"):
        api.bind(("x", "y"), {})


def test_unknown_root_binding_takes_both_forms():
    api = _api(["text"], root=None)  # gRPC: a single field may or may not be a root input
    assert api.bind(("x",), {}) == api.bind((), {"text": "x"}) == {"text": "x"}
