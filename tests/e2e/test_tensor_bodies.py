"""Tensor bodies read straight into their array and answered from its memory, on a real
server (issue 37 item 1): `.npy` bodies and parts, and the v2 binary extension.

The buffer pool (`tensorwire.wire.buffers.POOL`) is watched from the test process (the
server runs in a thread of it): what was allocated, and whether a buffer came back. The
limits hold before anything is allocated: a Content-Length over the limit is 413, a
header whose shape does not match the bytes that follow is 400; a body cut short, or a
client that hangs up mid-body, leaves no buffer held and the server serving.
"""

from __future__ import annotations

import http.client
import io
import socket
import threading
import time
import typing as t

import numpy as np
import orjson
import pytest

import tensorwire
from tensorwire.validators import DType
from tensorwire.wire import buffers, npy, oip
from tests.support.servers import serving

LIMIT = 8 << 20
F32 = t.Annotated[np.ndarray, DType("float32")]


@tensorwire.service
class Bodies:
    @tensorwire.api
    def echo(self, x: F32, /) -> F32:
        return x

    @tensorwire.api
    def total(self, a: F32, scale: float = 1.0) -> float:
        return float(a.sum()) * scale


class Spy:
    """Records every buffer the pool lends."""

    def __init__(self, pool: buffers.BufferPool) -> None:
        self.pool = pool
        self.sizes: list[int] = []
        self._take = pool.take

    def __call__(self, nbytes: int) -> memoryview:
        self.sizes.append(nbytes)
        return self._take(nbytes)


@pytest.fixture(scope="module")
def server() -> t.Iterator[t.Any]:
    with serving(Bodies, max_request_size=LIMIT) as running:
        yield running


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    pool = buffers.BufferPool()
    monkeypatch.setattr(buffers, "POOL", pool)
    monkeypatch.setattr(npy, "POOL", pool)
    from tensorwire.v2 import infer_body
    monkeypatch.setattr(infer_body, "POOL", pool)
    spy = Spy(pool)
    monkeypatch.setattr(pool, "take", spy)
    return spy


def post(server: t.Any, path: str, body: bytes, headers: dict[str, str]
         ) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def raw_exchange(server: t.Any, head: bytes, body: bytes, *, hang_up: bool = False) -> bytes:
    """Send a request head and (part of) a body on a socket of its own; the answer's
    head and body (read until its Content-Length, or the connection closes), or b""
    when `hang_up` closes the socket right after the bytes."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        sock.sendall(head + body)
        if hang_up:
            return b""
        answer = b""
        while data := sock.recv(1 << 16):
            answer += data
            top, sep, rest = answer.partition(b"\r\n\r\n")
            length = [int(line.split(b":")[1]) for line in top.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")]
            if sep and length and len(rest) >= length[0]:
                break
        return answer


def npy_headers(**extra: str) -> dict[str, str]:
    return {"Content-Type": npy.NPY, "Accept": npy.NPY, **extra}


def v2_body(x: np.ndarray) -> tuple[bytes, int]:
    head = orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}})
    return head + x.tobytes(), len(head)


def wait_free(pool: buffers.BufferPool, timeout: float = 10) -> None:
    """Until every kept buffer is free again (nothing refers to it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pool.free_count() == len(pool._kept):
            return
        time.sleep(0.05)
    raise AssertionError("a pooled buffer is still held")


def test_a_npy_body_is_read_into_one_buffer_and_answered_from_it(server: t.Any, spy: Spy
                                                                 ) -> None:
    x = np.random.default_rng(0).standard_normal((512, 1024), dtype=np.float32)  # 2 MiB
    for _ in range(3):
        status, headers, body = post(server, "/echo", npy.write(x), npy_headers())
        assert status == 200, body[:300]
        assert headers["Content-Type"] == npy.NPY
        np.testing.assert_array_equal(npy.read(body), x)
    assert spy.sizes == [x.nbytes] * 3
    assert spy.pool.allocated == 1 and spy.pool.reused == 2  # the one buffer, lent again


def test_the_buffer_stays_with_a_request_that_still_holds_it(spy: Spy) -> None:
    first = spy(4 << 20)
    kept = np.frombuffer(first, np.float32)[10:]  # a view the method kept
    del first
    second = spy(4 << 20)
    assert not np.shares_memory(kept, np.frombuffer(second, np.float32))
    del kept, second
    third = spy(4 << 20)
    assert spy.pool.reused == 1 and third.nbytes == 4 << 20


def test_a_length_over_the_limit_is_413_before_the_body_or_a_buffer(server: t.Any,
                                                                    spy: Spy) -> None:
    for path, extra in (("/echo", ""), ("/v2/models/echo/infer",
                                        f"{oip.INFERENCE_HEADER_CONTENT_LENGTH}: 10\r\n")):
        head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {npy.NPY}\r\n{extra}"
                f"Content-Length: {LIMIT + 1}\r\n\r\n").encode()
        answer = raw_exchange(server, head, b"\x93NUMPY")
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert spy.sizes == []


@pytest.mark.parametrize("case", ["claims_more", "claims_less", "huge_claim", "object"])
def test_a_header_that_does_not_match_the_bytes_is_400_with_nothing_allocated(
        server: t.Any, spy: Spy, case: str) -> None:
    data = npy.write(np.zeros((64, 64), np.float32))
    if case == "claims_more":
        data = data.replace(b"(64, 64)", b"(64, 65)")
    elif case == "claims_less":
        data = data.replace(b"(64, 64)", b"(64, 63)")
    elif case == "huge_claim":
        data = data.replace(b"(64, 64)", b"(99999999, 9999999)")
    else:
        buf = io.BytesIO()
        np.save(buf, np.array([1, "a"], dtype=object), allow_pickle=True)
        data = buf.getvalue()
    status, _, body = post(server, "/echo", data, npy_headers())
    assert status == 400, body
    assert spy.sizes == []
    got = orjson.loads(body)
    assert got["detail"][0]["type"] in ("tensor_size", "tensor_dtype"), got


def test_v2_binary_inputs_are_read_into_one_buffer(server: t.Any, spy: Spy) -> None:
    x = np.arange(256 * 1024, dtype=np.float32).reshape(256, 1024)  # 1 MiB
    body, n = v2_body(x)
    for _ in range(2):
        status, headers, answer = post(server, "/v2/models/echo/infer", body,
                                       {oip.INFERENCE_HEADER_CONTENT_LENGTH: str(n)})
        assert status == 200, answer[:300]
        size = int(headers[oip.INFERENCE_HEADER_CONTENT_LENGTH])
        assert np.array_equal(np.frombuffer(answer[size:], np.float32).reshape(x.shape), x)
    assert spy.sizes == [x.nbytes] * 2 and spy.pool.reused == 1


@pytest.mark.parametrize("cut", ["size", "shape"])
def test_v2_sizes_are_checked_before_a_buffer_is_lent(server: t.Any, spy: Spy, cut: str
                                                      ) -> None:
    x = np.zeros((512, 1024), np.float32)
    body, n = v2_body(x)
    body = body[:-4] if cut == "size" else body.replace(b"[512,1024]", b"[512,1023]")
    status, _, answer = post(server, "/v2/models/echo/infer", body,
                             {oip.INFERENCE_HEADER_CONTENT_LENGTH: str(n)})
    assert status == 400, answer
    assert spy.sizes == []


@pytest.mark.parametrize("path", ["/echo", "/v2/models/echo/infer"])
def test_a_client_that_hangs_up_mid_body_leaves_no_buffer_held(server: t.Any, spy: Spy,
                                                                path: str) -> None:
    x = np.ones((1024, 1024), np.float32)  # 4 MiB
    if path == "/echo":
        body, extra = npy.write(x), ""
    else:
        body, n = v2_body(x)
        extra = f"{oip.INFERENCE_HEADER_CONTENT_LENGTH}: {n}\r\n"
    head = (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {npy.NPY}\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    raw_exchange(server, head, body[: len(body) // 2], hang_up=True)
    deadline = time.monotonic() + 10
    while not spy.sizes and time.monotonic() < deadline:  # the buffer was lent...
        time.sleep(0.02)
    assert spy.sizes == [x.nbytes]
    wait_free(spy.pool)  # ...and nothing holds it once the client is gone
    status, _, answer = post(server, "/echo", npy.write(x), npy_headers())
    assert status == 200 and spy.pool.reused == 1, answer[:200]


def test_a_chunked_body_takes_the_bounded_path(server: t.Any, spy: Spy) -> None:
    x = np.arange(1000, dtype=np.float32)
    data = npy.write(x)

    def chunks() -> t.Iterator[bytes]:
        for i in range(0, len(data), 1000):
            yield data[i:i + 1000]

    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request("POST", "/echo", body=chunks(), headers=npy_headers(), encode_chunked=True)
    resp = conn.getresponse()
    assert resp.status == 200
    np.testing.assert_array_equal(npy.read(resp.read()), x)
    conn.close()
    assert spy.sizes == []  # gathered within the limit, read whole


def test_a_chunked_body_past_the_limit_is_413(server: t.Any, spy: Spy) -> None:
    head = (f"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: {npy.NPY}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    step = 1 << 20
    chunk = f"{step:x}\r\n".encode() + b"\0" * step + b"\r\n"
    answer = raw_exchange(server, head, chunk * (LIMIT // step + 1) + b"0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert spy.sizes == []


def test_a_npy_part_is_read_into_its_buffer(server: t.Any, spy: Spy) -> None:
    a = np.arange(512 * 1024, dtype=np.float32)  # 2 MiB
    boundary = "tensorwireBoundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"a\"\r\n"
            f"Content-Type: {npy.NPY}\r\n\r\n").encode() + npy.write(a) + (
        f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"scale\"\r\n"
        f"Content-Type: application/json\r\n\r\n2\r\n--{boundary}--\r\n").encode()
    status, _, answer = post(server, "/total", body,
                             {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 200, answer
    assert orjson.loads(answer) == float(a.sum()) * 2
    assert spy.sizes == [a.nbytes]


def test_bodies_read_from_the_socket_leave_the_connection_parsing(server: t.Any, spy: Spy,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """Two large bodies and a small request pipelined on one kept-alive connection: each
    large body is read straight from the socket (`_Lender`), and the request after it
    is parsed from its first byte by the fresh parser."""
    from tensorwire.http import aiohttp_compat

    lent: list[int] = []

    class Counting(aiohttp_compat._Lender):
        def __init__(self, *args: t.Any) -> None:
            super().__init__(*args)
            lent.append(self.view.nbytes)

    monkeypatch.setattr(aiohttp_compat, "_Lender", Counting)
    xs = [np.full((1024, 1024), i, np.float32) for i in (1, 2)]
    requests = b"".join(
        f"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: {npy.NPY}\r\nAccept: {npy.NPY}\r\n"
        f"Content-Length: {len(npy.write(x))}\r\n\r\n".encode() + npy.write(x) for x in xs)
    requests += b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as sock:
        sender = threading.Thread(target=sock.sendall, args=(requests,))
        sender.start()
        reader = sock.makefile("rb")
        answers = []
        for _ in range(3):
            status = reader.readline()
            headers = {}
            while (line := reader.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            answers.append((status, reader.read(int(headers["content-length"]))))
        sender.join()
    for (status, body), x in zip(answers[:2], xs, strict=True):
        assert status.startswith(b"HTTP/1.1 200"), body[:200]
        np.testing.assert_array_equal(npy.read(body), x)
    assert answers[2][0].startswith(b"HTTP/1.1 200")
    assert len(lent) == 2 and all(n > (1 << 20) for n in lent)
    assert spy.sizes == [xs[0].nbytes] * 2
