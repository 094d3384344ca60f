"""Over-long or too many multipart part headers are a 400 naming the problem, not a 500.

aiohttp's multipart reader raises its own parser exceptions (`LineTooLong` past 8190
bytes a line, `BadHttpMessage` past 128 lines); they must reach the client as a clear
client error, without echoing the client's bytes, and the server must keep serving.
"""

from __future__ import annotations

import json

import pytest

from tests.support.ops_service import Ops
from tests.support.raw_sockets import exchange, http_request
from tests.support.servers import serving

BOUNDARY = "reliability-boundary"
MULTIPART = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}


def multipart(*header_lines: str, value: bytes = b"hello") -> bytes:
    head = "\r\n".join(header_lines)
    return (f"--{BOUNDARY}\r\n{head}\r\n\r\n").encode() + value + (
        f"\r\n--{BOUNDARY}--\r\n").encode()


@pytest.fixture(scope="module")
def server():
    with serving(Ops) as running:
        yield running


CASES = {
    "long_header_line": (
        multipart('Content-Disposition: form-data; name="text"', "X-Long: " + "a" * 9000),
        "a part header line is longer than 8190 bytes"),
    "long_content_disposition": (
        multipart('Content-Disposition: form-data; name="text"; filename="'
                  + "f" * 20000 + '"'),
        "a part header line is longer than 8190 bytes"),
    "too_many_header_lines": (
        multipart('Content-Disposition: form-data; name="text"',
                  *[f"X-H{i}: v" for i in range(200)]),
        "Too many headers"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_part_headers_are_400(server, case):
    body, message = CASES[case]
    reply = exchange(server.http_port, http_request("/echo", body, MULTIPART))
    assert reply.status == 400, reply
    error = json.loads(reply.body)["error"]
    assert error.startswith("malformed multipart body: ")
    assert message in error
    assert "aaaa" not in error and "ffff" not in error  # no client bytes echoed
    # the server keeps serving, multipart included
    ok = exchange(server.http_port, http_request(
        "/echo", multipart('Content-Disposition: form-data; name="text"'), MULTIPART))
    assert (ok.status, ok.body) == (200, b"hello")
