"""Requests aiohttp's parser refuses before any handler runs (a bad header value or
name, an over-long line, a bad method, Content-Length or chunk size) are answered in the
error model like every other 4xx: JSON `{"error", "request_id"}` with `X-Request-ID`, and
the message names the fault without echoing the client's bytes. Raw sockets: no client
library would send these."""

from __future__ import annotations

import json

import pytest

from examples.quickstart import Quickstart
from tests.support.raw_sockets import exchange
from tests.support.servers import serving

_HEAD = b"POST /summarize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"

CASES = {
    "header-value": (_HEAD + b"Content-Type: \x01\x02;;;=\r\nContent-Length: 2\r\n\r\n{}",
                     "Invalid header value char"),
    "nul-in-header": (_HEAD + b"X-Bad: a\x00b\r\nContent-Length: 2\r\n\r\n{}",
                      "Invalid header value char"),
    "header-name": (_HEAD + b"Bad Header: a\r\nContent-Length: 2\r\n\r\n{}",
                    "Invalid header token"),
    "long-target": (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                    "longer than 8190 bytes"),
    "method": (b"FO\x01O / HTTP/1.1\r\nHost: x\r\n\r\n", "Invalid method"),
    "content-length": (_HEAD + b"Content-Length: abc\r\n\r\n",
                       "Invalid character in Content-Length"),
    "chunk-size": (_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
                   "Invalid character in chunk size"),
}


@pytest.fixture(scope="module")
def server():
    with serving(Quickstart) as running:
        yield running


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_request_the_parser_refuses_is_a_json_400_with_a_request_id(server, case):
    request, fault = CASES[case]
    reply = exchange(server.http_port, request)
    assert reply.status == 400, reply
    headers = dict(line.split(": ", 1) for line in reply.head.split("\r\n")[1:])
    assert headers["Content-Type"] == "application/json", reply.head
    body = json.loads(reply.body)
    assert body["error"].startswith("malformed HTTP request: ") and fault in body["error"]
    assert body["request_id"] == headers["X-Request-ID"]
    assert headers["x-tensorwire-error"] == "InvalidArgument"
    assert b"\x01" not in reply.body and b"aaaa" not in reply.body  # nothing echoed


def test_the_server_serves_on_after_them(server):
    for request, _ in CASES.values():
        exchange(server.http_port, request)
    ok = exchange(server.http_port, _HEAD + b"Content-Type: application/json\r\n"
                  b"Content-Length: 13\r\n\r\n{\"text\": \"a\"}")
    assert ok.status == 200 and json.loads(ok.body)["summary"] == "a"
