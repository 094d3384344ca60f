"""An in-memory body read as it arrives, for the direct-read tests of `.npy` and the
v2 binary extension: what `tensorwire.http.parts` hands the wire readers, with the
bytes cut into chunks of chosen sizes (aiohttp's reads are not aligned to anything)."""

from __future__ import annotations

import numpy as np


class ByteSource:
    """`data` served `chunk` bytes at a time. `length`: the Content-Length announced
    (None: unknown, as for a multipart part; then `bound` says what it may hold);
    `stop_after`: the client goes quiet after this many bytes (a truncated body)."""

    def __init__(self, data: bytes, chunk: int = 7, *, length: int | None = -1,
                 bound: int | None = -1, stop_after: int | None = None) -> None:
        self._data = data if stop_after is None else data[:stop_after]
        self._chunk = chunk
        self._pos = 0
        self.length = len(data) if length == -1 else length
        self.bound = (self.length if bound == -1 else bound)
        self.consumed = 0
        self.whole_reads = 0

    def _next(self, n: int) -> bytes:
        n = min(n, self._chunk)
        out = self._data[self._pos:self._pos + n]
        self._pos += len(out)
        self.consumed += len(out)
        return out

    async def read(self) -> bytes:
        self.whole_reads += 1
        out = self._data[self._pos:]
        self._pos = len(self._data)
        self.consumed += len(out)
        return out

    async def read_exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n and (piece := self._next(n - len(out))):
            out += piece
        return out

    async def read_into(self, view: memoryview) -> int:
        pos = 0
        while pos < view.nbytes and (piece := self._next(view.nbytes - pos)):
            view[pos:pos + len(piece)] = piece
            pos += len(piece)
        return pos


class Taker:
    """A `take(nbytes)` that records what was allocated (nothing, for a refusal)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, nbytes: int) -> memoryview:
        self.sizes.append(nbytes)
        return memoryview(np.empty(nbytes, np.uint8))
