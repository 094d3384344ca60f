"""A tiny DNS server on a loopback UDP port, for clients given `dns://HOST:PORT/name:port`.

The test machine's resolver cannot be changed, and `localhost` has one address; this
answers A queries for the names it is given with several addresses (a headless
Kubernetes Service in miniature), NXDOMAIN for other names and no records for other
types (AAAA). gRPC's DNS resolver asks it when the target names it as the authority.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Mapping, Sequence

A, IN = 1, 1
NXDOMAIN = 3


class FakeDNS:
    def __init__(self, records: Mapping[str, Sequence[str]]) -> None:
        self.records = {name.lower().rstrip("."): list(addrs)
                        for name, addrs in records.items()}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        #: (name, query type) of every question asked.
        self.queries: list[tuple[str, int]] = []
        self.sock.settimeout(0.1)  # how soon the thread sees `close`
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fake-dns", daemon=True)
        self._thread.start()

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                data, peer = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            try:
                reply = self.answer(data)
            except (IndexError, struct.error, UnicodeDecodeError):
                continue  # not a query this server understands
            self.sock.sendto(reply, peer)

    def answer(self, query: bytes) -> bytes:
        qid = struct.unpack("!H", query[:2])[0]
        i, labels = 12, []
        while query[i]:
            n = query[i]
            labels.append(query[i + 1:i + 1 + n].decode())
            i += 1 + n
        qtype = struct.unpack("!H", query[i + 1:i + 3])[0]
        question = query[12:i + 5]
        name = ".".join(labels).lower()
        self.queries.append((name, qtype))
        addresses = self.records.get(name)
        answers = b""
        count = 0
        if addresses is not None and qtype == A:
            for address in addresses:  # name: a pointer to the question's (offset 12)
                answers += struct.pack("!HHHIH", 0xC00C, A, IN, 1, 4)
                answers += socket.inet_aton(address)
                count += 1
        rcode = 0 if addresses is not None else NXDOMAIN
        header = struct.pack("!HHHHHH", qid, 0x8180 | rcode, 1, count, 0, 0)
        return header + question + answers

    def close(self) -> None:
        """Stop answering, then close: a reply never goes to a closed socket."""
        self._closed.set()
        self._thread.join(timeout=5)
        self.sock.close()
