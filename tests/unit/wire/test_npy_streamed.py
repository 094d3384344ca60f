"""`npy.read_from` (a body read as it arrives, straight into one buffer) against
`npy.read` (the body whole): the same array or the same refusal, word for word, on every
case; sizes checked before anything is allocated; and an answer written from the array's
own memory (`write_parts`)."""

from __future__ import annotations

import asyncio
import io
import typing as t

import ml_dtypes
import numpy as np
import pytest

from tensorwire.wire import dtypes, npy
from tensorwire.wire.field_error import FieldError
from tests.support.byte_source import ByteSource, Taker


def np_save(array: np.ndarray, **kw: t.Any) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array, **kw)
    return buf.getvalue()


def _every_dtype() -> list[np.ndarray]:
    arrays = []
    for spec in dtypes.TABLE:
        if spec.is_string:
            arrays.append(np.array([["a", "héllo", ""], ["\U0001f600", "x", "yz"]]))
        elif spec is dtypes.BFLOAT16:
            arrays.append(np.array([[1.5, -2.0, 0.0], [3.0, 1e30, -0.5]], ml_dtypes.bfloat16))
        elif spec.kind == "bool":
            arrays.append(np.array([[True, False, True], [False, False, True]]))
        else:
            arrays.append((np.arange(6) * 3 + 1).astype(spec.numpy()).reshape(2, 3))
    return arrays


VALID = [
    *_every_dtype(),
    np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
    np.arange(6, dtype=">f8").reshape(2, 3),
    np.array(["a", "héllo"], ">U5"),
    np.array(3.5),
    np.zeros((0, 3), np.uint8),
    np.arange(100_000, dtype=np.float32).reshape(100, 1000),  # many chunks
]

INVALID = [
    np_save(np.array([1, "a"], dtype=object), allow_pickle=True),
    np_save(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")])),
    np_save(np.array([b"ab"])),
    np_save(np.zeros((2, 4), np.float32))[:-1],
    np_save(np.zeros((2, 4), np.float32)) + b"\0",
    np_save(np.zeros((2, 4), np.float32)).replace(b"(2, 4)", b"(9, 4)"),
    np_save(np.zeros((2, 4), np.float32)).replace(b"(2, 4)", b"(-2, 4)"),
    np_save(np.zeros((2, 4), np.float32)).replace(b"(2, 4)", b"(99999999999, 99999999)"),
    b"PK\x03\x04 not npy at all",
    b"\x93NUMPY",
    b"",
    b"\x93NUMPY\x01\x00\x08\x00{'descr'",
    b"\x93NUMPY\x01\x00\xff\xff" + b" " * 40,  # a header longer than MAX_HEADER
    b"\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': '<f4'}",
    b"\x93NUMPY\x03\x00" + b"\0" * 20,
    np_save(np.array([2, 0], np.uint8)).replace(b"|u1", b"|b1"),  # bool byte 2
    np_save(np.array(["ab"], "<U2")).replace("b".encode("utf-32-le"), b"\x00\xd8\x00\x00"),
    np_save(np.array(["ab"], ">U2")).replace("b".encode("utf-32-be"), b"\x00\x11\x00\x00"),
]


def _outcome(read: t.Callable[[], t.Any]) -> tuple[str, t.Any]:
    try:
        return "ok", read()
    except FieldError as exc:
        return "error", (exc.type, exc.msg)


def _same(a: tuple[str, t.Any], b: tuple[str, t.Any]) -> None:
    assert a[0] == b[0], (a, b)
    if a[0] == "error":
        assert a[1] == b[1]
    else:
        assert a[1].dtype == b[1].dtype and a[1].shape == b[1].shape
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 20])
@pytest.mark.parametrize("known_length", [True, False], ids=["content-length", "part"])
@pytest.mark.parametrize("data", [np_save(a) for a in VALID] + INVALID)
def test_direct_read_matches_the_whole_body_read(data: bytes, chunk: int,
                                                 known_length: bool) -> None:
    declared = dtypes.BFLOAT16 if b"<V2" in data[:128] or b"|V2" in data[:128] else None
    expected = _outcome(lambda: npy.read(data, declared))
    source = ByteSource(data, chunk, length=len(data) if known_length else None,
                        bound=len(data) + 10)
    got = _outcome(lambda: asyncio.run(npy.read_from(source, declared, Taker())))
    _same(got, expected)


def test_bfloat16_saved_by_numpy_reads_as_declared() -> None:
    data = np_save(np.array([1.5, -2.0], ml_dtypes.bfloat16))  # |V2 on disk
    out = asyncio.run(npy.read_from(ByteSource(data), dtypes.BFLOAT16, Taker()))
    assert out.dtype == ml_dtypes.bfloat16 and out.tolist() == [1.5, -2.0]


@pytest.mark.parametrize("data", [
    np_save(np.zeros((2, 4), np.float32))[:-1],
    np_save(np.zeros((2, 4), np.float32)) + b"\0",
    np_save(np.zeros((2, 4), np.float32)).replace(b"(2, 4)", b"(99999999999, 99999999)"),
    np_save(np.array([1, "a"], dtype=object), allow_pickle=True),
    b"\x93NUMPY\x01\x00\x08\x00{'descr'",
])
def test_nothing_is_allocated_before_the_size_is_checked(data: bytes) -> None:
    taker = Taker()
    with pytest.raises(FieldError):
        asyncio.run(npy.read_from(ByteSource(data, 3), None, taker))
    assert taker.sizes == []


def test_the_array_is_one_buffer_of_its_size_and_the_header_is_not_in_it() -> None:
    array = np.arange(1000, dtype=np.float64).reshape(10, 100)
    taker = Taker()
    out = asyncio.run(npy.read_from(ByteSource(np_save(array), 4096), None, taker))
    assert taker.sizes == [array.nbytes]
    np.testing.assert_array_equal(out, array)
    assert out.flags.writeable


def test_a_truncated_body_is_refused_after_what_came() -> None:
    data = np_save(np.zeros(1000, np.float32))
    source = ByteSource(data, 100, stop_after=len(data) - 10)
    with pytest.raises(FieldError, match=f"ended after {len(data) - 10} of its {len(data)}"):
        asyncio.run(npy.read_from(source, None, Taker()))


def test_a_part_whose_claim_exceeds_its_bound_is_read_whole_within_the_limits() -> None:
    data = np_save(np.zeros(1000, np.float32))
    source = ByteSource(data, 100, length=None, bound=1000)  # claims 4000 bytes
    taker = Taker()
    out = asyncio.run(npy.read_from(source, None, taker))
    assert source.whole_reads == 1 and taker.sizes == [] and out.shape == (1000,)


def test_write_parts_is_the_header_and_a_view_of_the_array() -> None:
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    head, data = npy.write_parts(array)
    assert np.shares_memory(np.frombuffer(data, np.uint8), array)
    assert head + data.tobytes() == npy.write(array) == np_save(array)
    fortran = np.asfortranarray(array)
    head, data = npy.write_parts(fortran)
    np.testing.assert_array_equal(npy.read(head + data.tobytes()), array)
