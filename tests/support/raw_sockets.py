"""Raw sockets for hostile-client tests, and a process's resources read from /proc.

No HTTP or gRPC client library in the way: the bytes sent are exactly the test's, and a
server's answer is whatever comes back before the socket closes.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass


@dataclass
class RawReply:
    status: int
    head: str
    body: bytes


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    """Everything the peer sends until it closes (EOF or reset); TimeoutError if it
    is still open after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    data = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"still open after {timeout} s (got {bytes(data[:200])!r})")
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return bytes(data)
        if not chunk:
            return bytes(data)
        data += chunk


def parse_reply(data: bytes) -> RawReply:
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise AssertionError(f"not an HTTP response: {data[:200]!r}")
    return RawReply(int(parts[1]), head.decode("latin-1"), body)


def exchange(port: int, request: bytes, timeout: float = 30.0) -> RawReply:
    """Send `request` (which should say `Connection: close`) and read the whole reply."""
    with connect(port, timeout) as sock:
        sock.sendall(request)
        return parse_reply(read_until_closed(sock, timeout))


def http_request(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    """An HTTP/1.1 POST with `Content-Length` and `Connection: close`, as bytes."""
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}",
             "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# ---------------------------------------------------------------- /proc
def open_fds(pid: int | None = None) -> int:
    """How many file descriptors the process holds now."""
    return len(os.listdir(f"/proc/{pid or os.getpid()}/fd"))


def _status_kib(pid: int | None, key: str) -> int:
    with open(f"/proc/{pid or os.getpid()}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def rss_kib(pid: int | None = None) -> int:
    """Resident memory now (VmRSS), KiB."""
    return _status_kib(pid, "VmRSS")


def peak_rss_kib(pid: int | None = None) -> int:
    """The most resident memory the process ever had (VmHWM), KiB."""
    return _status_kib(pid, "VmHWM")


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return bool(predicate())
        time.sleep(interval)
