"""Payload-sized buffers reused across requests, handed out only while nobody holds them.

A tensor body read straight from the socket needs one buffer of its size. A fresh
allocation of tens of MiB is not free: the allocator maps new pages and the first write
to each one faults (a copy into a fresh 64 MiB buffer ran at 2.4 GB/s on the bench box,
into a reused one at 15-30 GB/s). So buffers from `MIN_POOLED` bytes up are kept and
lent again.

Ownership is decided by references, not by a release call that every path would have
to reach: the array a request decodes (and every view, slice, `memoryview` or
`torch.from_numpy` of it) keeps a reference to the buffer it lives in (NumPy's `base`
chain ends at the array that owns the memory). A pooled buffer is lent again only when
the pool's own reference is the last one, so the user's method may keep its input (in
a cache, a batch, a background task) for as long as it likes: that buffer is simply not
reused while it lives, and the next request gets another one. An answer written from
the input's memory (an echo) holds it until the transport has taken the bytes; uvloop's
transport keeps a reference to what it has not sent yet, which holds the buffer too.

The pool is bounded (`MAX_BUFFERS`, `MAX_BYTES`) and forgets buffers left unused for
`IDLE_SECONDS`, so a worker that once served a huge tensor does not keep it resident.
CPython's reference counts are what `sys.getrefcount` reads; the pool is per process
and used from the event loop's thread only.
"""

from __future__ import annotations

import sys
import time

import numpy as np

#: Buffers smaller than this come from the allocator each time (its own free lists are
#: warm for them).
MIN_POOLED = 1 << 20
#: At most this many buffers, and this many bytes, are kept.
MAX_BUFFERS = 4
MAX_BYTES = 256 << 20
#: A kept buffer unused for this long is dropped at the next request that asks.
IDLE_SECONDS = 30.0
#: A kept buffer is lent for a request of at least this share of its size (a 64 MiB
#: buffer is not tied up by a 2 MiB body).
FIT = 0.5

def _refs(kept: list[np.ndarray], i: int) -> int:
    """References to `kept[i]`, seen from here (the list's, and the ones this call's
    own frame and `getrefcount` add: calibrated once below, since interpreters differ
    in how many of those they count)."""
    return sys.getrefcount(kept[i])


#: What `_refs` reads for a buffer that nothing but the pool's list refers to.
_IDLE_REFS = _refs([np.empty(0, np.uint8)], 0)


class BufferPool:
    """Large byte buffers lent to one request at a time (see the module docstring)."""

    def __init__(self, max_buffers: int = MAX_BUFFERS, max_bytes: int = MAX_BYTES,
                 min_pooled: int = MIN_POOLED, idle_seconds: float = IDLE_SECONDS) -> None:
        self.max_buffers = max_buffers
        self.max_bytes = max_bytes
        self.min_pooled = min_pooled
        self.idle_seconds = idle_seconds
        self._kept: list[np.ndarray] = []
        #: When each kept buffer was last lent (monotonic seconds).
        self._used: list[float] = []
        #: Buffers lent from the pool, and ones newly allocated (the bench reads them).
        self.reused = 0
        self.allocated = 0

    def take(self, nbytes: int) -> memoryview:
        """A writable byte view of exactly `nbytes` bytes, reused when a kept buffer is
        free and fits, else newly allocated (and kept, when the bounds allow)."""
        if nbytes < self.min_pooled:
            return memoryview(np.empty(nbytes, np.uint8))
        now = time.monotonic()
        kept = self._kept
        best = -1
        for i in range(len(kept)):
            size = kept[i].nbytes
            if (FIT * size <= nbytes <= size and self._free(i)
                    and (best < 0 or size < kept[best].nbytes)):
                best = i
        if best >= 0:
            self.reused += 1
            self._used[best] = now
            return memoryview(kept[best][:nbytes])
        self._trim(now)
        self.allocated += 1
        buf = np.empty(nbytes, np.uint8)
        if len(self._kept) < self.max_buffers and self.kept_bytes + nbytes <= self.max_bytes:
            self._kept.append(buf)
            self._used.append(now)
        return memoryview(buf)

    def _free(self, i: int) -> bool:
        """Whether nothing but the pool refers to its `i`th buffer (no array, view or
        memoryview of it is alive anywhere)."""
        return _refs(self._kept, i) <= _IDLE_REFS

    def free_count(self) -> int:
        """How many kept buffers are free now (the tests and the bench read it)."""
        return sum(self._free(i) for i in range(len(self._kept)))

    def _trim(self, now: float) -> None:
        """Forget free buffers idle past `idle_seconds`, and, when the pool is full,
        the free one used longest ago, so that a new buffer can be kept."""
        keep = [i for i in range(len(self._kept))
                if not (self._free(i) and now - self._used[i] > self.idle_seconds)]
        if len(keep) >= self.max_buffers:
            free = [i for i in keep if self._free(i)]
            if free:
                keep.remove(min(free, key=lambda i: self._used[i]))
        self._kept = [self._kept[i] for i in keep]
        self._used = [self._used[i] for i in keep]

    @property
    def kept_bytes(self) -> int:
        return sum(b.nbytes for b in self._kept)


#: The process's pool (request bodies are read on the event loop's thread).
POOL = BufferPool()
