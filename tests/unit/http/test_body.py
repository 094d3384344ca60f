"""Bounded inflation of compressed request bodies (`tensorwire.http.body.Inflater`)."""

from __future__ import annotations

import gzip
import zlib

import pytest

from tensorwire.errors import InvalidArgument, PayloadTooLarge
from tensorwire.http.body import STEP, Inflater

MiB = 1024 * 1024


def chunks(data: bytes, size: int = 65536) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_a_bomb_stops_one_step_past_the_limit():
    bomb = gzip.compress(bytes(64 * MiB), 9)  # ~64 KiB: one socket read
    inflater = Inflater("gzip", MiB)
    made: list[int] = []
    with pytest.raises(PayloadTooLarge, match="exceeds the limit of 1048576 bytes"):
        for chunk in chunks(bomb):
            made.extend(len(p) for p in inflater.feed(chunk))
    assert max(made) <= STEP
    assert sum(made) <= MiB  # the piece that crossed the limit was never handed out
    assert inflater.given <= MiB + STEP


@pytest.mark.parametrize("size", [1, 100, STEP - 1, STEP, STEP + 1, 5 * STEP])
@pytest.mark.parametrize("coding,compress", [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("deflate", lambda d: zlib.compress(d, wbits=-zlib.MAX_WBITS)),
])
def test_round_trip_at_step_edges(size, coding, compress):
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    inflater = Inflater(coding, 10 * MiB)
    out = b"".join(p for c in chunks(compress(data), 7) for p in inflater.feed(c))
    inflater.finish()
    assert out == data


def test_gzip_members_and_errors():
    inflater = Inflater("gzip", MiB)
    out = b"".join(inflater.feed(gzip.compress(b"ab") + gzip.compress(b"cd")))
    inflater.finish()
    assert out == b"abcd"
    truncated = Inflater("gzip", MiB)
    list(truncated.feed(gzip.compress(b"x" * 1000)[:-10]))
    with pytest.raises(InvalidArgument, match="truncated gzip"):
        truncated.finish()
    with pytest.raises(InvalidArgument, match="not valid gzip"):
        list(Inflater("gzip", MiB).feed(b"not gzip at all"))
    with pytest.raises(InvalidArgument, match="after the end of the deflate"):
        list(Inflater("deflate", MiB).feed(zlib.compress(b"x") + b"more"))


def test_compressed_bytes_count_too():
    with pytest.raises(PayloadTooLarge, match="compressed request body"):
        list(Inflater("gzip", 10).feed(b"\x1f\x8b" + bytes(20)))
