"""Compressed request bodies: gzip and deflate are inflated in bounded steps that count
against the size limit; other codings are 415; corrupt data is 400.

The bomb cases run the server as its own process and read its peak resident memory
(VmHWM) from /proc before and after: the body must never be inflated past the limit.
"""

from __future__ import annotations

import gzip
import json
import threading
import zlib

import pytest

from tests.support.hostile_service import Hostile
from tests.support.http_calls import post
from tests.support.raw_sockets import peak_rss_kib
from tests.support.servers import serving, spawn_cli

MiB = 1024 * 1024


def deflate_raw(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


CODINGS = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,  # RFC 9110: the zlib format
    "deflate-raw": deflate_raw,  # what some clients send as "deflate"
}


def header_of(coding: str) -> str:
    return "deflate" if coding == "deflate-raw" else coding


@pytest.fixture(scope="module")
def server():
    with serving(Hostile, max_request_size=MiB) as running:
        yield running


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_compressed_json_body(server, coding):
    body = json.dumps({"text": "x" * 100_000, "repeat": 3}).encode()
    reply = post(f"{server.http_url}/count", CODINGS[coding](body),
                 headers={"Content-Encoding": header_of(coding)})
    assert (reply.status, reply.json()) == (200, 300_000)


@pytest.mark.parametrize("coding", sorted(CODINGS))
def test_compressed_root_bodies(server, coding):
    compress = CODINGS[coding]
    headers = {"Content-Encoding": header_of(coding)}
    text = post(f"{server.http_url}/upper", compress(b"hello " * 1000),
                content_type="text/plain", headers=headers)
    assert (text.status, text.body) == (200, b"HELLO " * 1000)
    data = post(f"{server.http_url}/size", compress(bytes(range(256)) * 1000),
                content_type="application/octet-stream", headers=headers)
    assert (data.status, data.json()) == (200, 256_000)


def test_gzip_members_and_identity(server):
    body = json.dumps({"text": "abc"}).encode()
    two_members = gzip.compress(body[:5]) + gzip.compress(body[5:])
    reply = post(f"{server.http_url}/echo", two_members, headers={"Content-Encoding": "gzip"})
    assert (reply.status, reply.body) == (200, b"abc")
    plain = post(f"{server.http_url}/echo", body, headers={"Content-Encoding": "identity"})
    assert (plain.status, plain.body) == (200, b"abc")


@pytest.mark.parametrize("coding", ["br", "zstd", "compress", "gzip, gzip"])
def test_other_codings_are_415(server, coding):
    reply = post(f"{server.http_url}/echo", b"\x00\x01", headers={"Content-Encoding": coding})
    assert reply.status == 415
    assert "Content-Encoding" in reply.json()["error"]
    assert reply.headers["accept-encoding"] == "gzip, deflate"


def test_compressed_multipart_is_415(server):
    boundary = "b0undary"
    body = (f'--{boundary}\r\nContent-Disposition: form-data; name="text"\r\n\r\nhi\r\n'
            f"--{boundary}--\r\n").encode()
    reply = post(f"{server.http_url}/echo", gzip.compress(body),
                 content_type=f"multipart/form-data; boundary={boundary}",
                 headers={"Content-Encoding": "gzip"})
    assert reply.status == 415
    assert "compressed multipart" in reply.json()["error"]


@pytest.mark.parametrize("case", ["corrupt", "truncated", "trailing"])
def test_bad_compressed_data_is_400(server, case):
    good = json.dumps({"text": "x" * 10_000}).encode()
    coding, data = {
        "corrupt": ("gzip", b"\x1f\x8b\x08\x00garbage-not-deflate" * 10),
        "truncated": ("gzip", gzip.compress(good)[:-20]),
        "trailing": ("deflate", zlib.compress(good) + b"junk"),
    }[case]
    reply = post(f"{server.http_url}/echo", data, headers={"Content-Encoding": coding})
    assert reply.status == 400, reply
    assert coding in reply.json()["error"]
    assert post(f"{server.http_url}/echo", {"text": "ok"}).body == b"ok"


def test_inflated_size_counts_against_the_limit(server):
    body = json.dumps({"text": "x" * (2 * MiB)}).encode()  # 2 MiB inflated, ~2 KiB sent
    for path, kw in (("echo", {}), ("upper", {"content_type": "text/plain"}),
                     ("size", {"content_type": "application/octet-stream"})):
        reply = post(f"{server.http_url}/{path}", gzip.compress(body),
                     headers={"Content-Encoding": "gzip"}, **kw)
        assert reply.status == 413, (path, reply)
        assert "exceeds the limit of 1048576 bytes" in reply.json()["error"]


def bomb(inflated: int, coding: str = "gzip") -> bytes:
    """`inflated` bytes of zeros compressed, built without holding them."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS if coding == "gzip"
                         else zlib.MAX_WBITS)
    zeros = bytes(MiB)
    out = [c.compress(zeros) for _ in range(inflated // MiB)]
    return b"".join(out) + c.flush()


@pytest.mark.slow
@pytest.mark.parametrize("coding", ["gzip", "deflate"])
def test_bombs_never_inflate_past_the_limit(coding):
    """One 256 MiB bomb (~250 KiB on the wire) against an 8 MiB limit, then ten at once:
    413 each, and the worker's peak memory grows by about the limit, not by the bomb."""
    payload = bomb(256 * MiB, coding)
    assert len(payload) < MiB
    server = spawn_cli("tests.support.hostile_service:Hostile", "--max-request-size",
                       "8MiB", "--no-grpc")
    try:
        pid = server.process.pid
        url = f"{server.http_url}/echo"
        assert post(url, {"text": "warm"}).status == 200
        before = peak_rss_kib(pid)
        reply = post(url, payload, headers={"Content-Encoding": coding})
        assert reply.status == 413
        one = peak_rss_kib(pid) - before
        statuses: list[int] = []

        def send() -> None:
            statuses.append(post(url, payload, headers={"Content-Encoding": coding}).status)

        threads = [threading.Thread(target=send) for _ in range(10)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        ten = peak_rss_kib(pid) - before
        assert statuses == [413] * 10
        # Unbounded inflation grew a worker by ~66 MiB on one (ten: ~290 MiB); bounded,
        # a request holds at most the 8 MiB limit plus one 64 KiB step (ten at once:
        # at most ten times that, however they interleave).
        assert one < 24 * 1024, f"peak RSS grew {one} KiB on one bomb"
        assert ten < 96 * 1024, f"peak RSS grew {ten} KiB on ten bombs"
        assert post(url, {"text": "still serving"}).body == b"still serving"
    finally:
        server.stop()
