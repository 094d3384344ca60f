"""Tensors as NumPy `.npy` files over HTTP (`application/x-npy`), and Accept negotiation.

Reading uses `numpy.lib.format`'s header parser (a literal parser, never pickle) and
then the same checks as the protobuf path: the dtype must be in the table (object and
structured arrays are refused: they are how pickles hide in .npy files), and the
header's shape times itemsize must equal the bytes that follow before the array is made
as a view of the body. bfloat16 is written with the descr `'bfloat16'`, which NumPy
reads back wherever ml_dtypes is imported.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.lib import format as npformat

from . import dtypes
from .buffers import POOL
from .field_error import FieldError
from .tensors import check_shape, from_bytes, wire_array

NPY = "application/x-npy"
MAX_HEADER = 10_000
_MAGIC = b"\x93NUMPY"
#: Bytes that hold the magic, the version and the header's length (format 2.0's).
PREFIX = 12


class Source(Protocol):
    """A body or part that an array is read from as it arrives (`read_from`).

    `length`: the bytes it holds when known up front (a body's Content-Length), else
    None; `bound`: the most it may hold without a 413 (what the request's limits and
    its Content-Length leave), None when nothing bounds it but the limit applied while
    it streams.
    """

    length: int | None
    bound: int | None

    async def read(self) -> bytes:
        """Everything not read yet, within the limits (413 past them)."""
        ...

    async def read_exactly(self, n: int) -> bytes:
        """The next `n` bytes, or fewer where the body ends first."""
        ...

    async def read_into(self, view: memoryview) -> int:
        """Fill `view` from the next bytes; returns how many came (fewer: the end)."""
        ...


@dataclass(frozen=True, slots=True)
class Header:
    """What a .npy header says, checked: the array is `shape` of `dtype` in `order`,
    its bytes start at `offset`."""

    shape: tuple[int, ...]
    dtype: np.dtype
    spec: dtypes.DTypeSpec
    order: str
    offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def check_size(self, body_length: int) -> None:
        """FieldError unless exactly the array's bytes follow the header."""
        expected = self.nbytes
        if body_length - self.offset != expected:
            raise FieldError(f"the .npy header says shape {list(self.shape)} of "
                             f"{self.dtype.str} ({expected} bytes) but "
                             f"{body_length - self.offset} bytes follow", type="tensor_size")


def read(data: bytes | bytearray | memoryview, declared: dtypes.DTypeSpec | None = None
         ) -> np.ndarray:
    """The array in a .npy body; FieldError for anything but a plain numeric/str array.

    `np.save` writes bfloat16 arrays as anonymous 2-byte voids (`|V2`); where the
    declared dtype is bfloat16 such a file is read as bfloat16.
    """
    head = parse_header(data, declared)
    head.check_size(len(data))
    return _finish(head, data, head.offset)


def parse_header(data: bytes | bytearray | memoryview,
                 declared: dtypes.DTypeSpec | None = None) -> Header:
    """The checked header at the start of `data` (which may hold only its first
    `header_length(data)` bytes): every refusal `read` makes before it looks at the
    array's bytes."""
    if len(data) < 10 or bytes(data[:6]) != _MAGIC:
        raise FieldError("the body is not a NumPy .npy file", type="npy")
    fp = io.BytesIO(data)
    try:
        version = npformat.read_magic(fp)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"unsupported .npy format version {version}")
        header_end = _peek_header(data, version)
        if b"bfloat16" in bytes(data[:header_end]):
            dtypes.bfloat16_type()  # registers np.dtype("bfloat16") for the parser
        reader = (npformat.read_array_header_1_0 if version == (1, 0)
                  else npformat.read_array_header_2_0)
        shape, fortran_order, dtype = reader(fp, max_header_size=MAX_HEADER)
    except FieldError:
        raise
    except Exception as exc:  # ValueError for a bad header, TypeError for odd descrs
        raise FieldError(f"malformed .npy header: {exc}", type="npy") from None
    if (declared is dtypes.BFLOAT16 and dtype.kind == "V" and dtype.itemsize == 2
            and dtype.fields is None):
        dtype = dtypes.BFLOAT16.numpy()
    if dtype.hasobject:
        raise FieldError("object arrays are refused (they would need pickle)",
                         type="tensor_dtype")
    spec = dtypes.from_numpy(dtype)
    if spec is None:
        raise FieldError(f"dtype {dtype} is not a tensor dtype; use one of "
                         f"{', '.join(d.name for d in dtypes.TABLE)}", type="tensor_dtype")
    shape = tuple(shape)
    check_shape(shape)
    return Header(shape, dtype, spec, "F" if fortran_order else "C", fp.tell())


def header_length(prefix: bytes | bytearray | memoryview) -> int:
    """How many bytes the header takes, from the first `PREFIX` bytes of a body (the
    whole prefix when it is no .npy file: `parse_header` then says why)."""
    if len(prefix) < 10 or bytes(prefix[:6]) != _MAGIC or prefix[6] not in (1, 2):
        return len(prefix)
    return _peek_header(prefix, (prefix[6], 0))


def _finish(head: Header, data: Any, offset: int) -> np.ndarray:
    """The array of `head` over `data` (its bytes from `offset`, size checked)."""
    dtype, spec, shape = head.dtype, head.spec, head.shape
    if spec.is_string or dtype.byteorder == ">":
        flat = np.frombuffer(data, dtype=dtype, offset=offset) if head.nbytes else \
            np.empty(0, dtype)
        array = flat.reshape(shape, order=head.order)
        if dtype.byteorder == ">":  # one copy into little-endian (native) order
            array = array.astype(dtype.newbyteorder("<"))
        if spec.is_string:
            _check_text(array)
        return array
    return from_bytes(data, spec, shape, offset=offset, order=head.order)


async def read_from(source: Source, declared: dtypes.DTypeSpec | None = None,
                    take: Callable[[int], memoryview] | None = None) -> np.ndarray:
    """The array of a .npy body read as it arrives: the header first, checked against
    the body's length (or its bound) before anything is allocated, then the array's
    bytes straight into one buffer (`take(nbytes)`, a reused one from the pool by
    default): no chunks gathered, no join. Refuses exactly what `read` refuses, with
    the same messages.

    A source of unknown length (a multipart part) is read straight in only when the
    header's claim fits its `bound`; otherwise, and for a source with no bound at all
    (a chunked body), its bytes are gathered within the limits and read by `read`.
    """
    prefix = await source.read_exactly(PREFIX)
    rest = header_length(prefix) - len(prefix)
    if rest > 0:
        prefix += await source.read_exactly(rest)
    length = source.length
    if length is not None and length < len(prefix):  # cannot be: a short read is the end
        length = len(prefix)
    try:
        head = parse_header(prefix, declared)
    except FieldError:
        if length is None:  # drain within the limits first: a 413 outranks the header
            await source.read()
        raise
    if length is not None:
        head.check_size(length)  # before anything is allocated
    elif source.bound is None or head.offset + head.nbytes > source.bound:
        return read(prefix + await source.read(), declared)
    body = (take or POOL.take)(head.nbytes)
    got = await source.read_into(body) if head.nbytes else 0
    if length is None:
        extra = len(await source.read()) if got == head.nbytes else 0
        head.check_size(head.offset + got + extra)
    elif got != head.nbytes:  # the client stopped short of its Content-Length
        raise FieldError(f"the .npy body ended after {head.offset + got} of its "
                         f"{length} bytes", type="npy")
    return _finish(head, body, 0)


def _check_text(array: np.ndarray) -> None:
    """A `<U` array holds raw UCS-4 code points, any 32-bit value: lone surrogates and
    values past U+10FFFF are no text, and would only fail later, as a 500, when the
    strings are encoded as UTF-8 for a protobuf or JSON answer."""
    if not array.size:
        return
    codes = np.ascontiguousarray(array).view(np.uint32)
    if ((codes >= 0xD800) & (codes <= 0xDFFF)).any() or (codes > 0x10FFFF).any():
        raise FieldError("string tensors must hold Unicode text (no surrogates, no code "
                         "points past U+10FFFF)", type="tensor_value")


def _peek_header(data: Any, version: tuple[int, int]) -> int:
    width = 2 if version == (1, 0) else 4
    size = int.from_bytes(bytes(data[8:8 + width]), "little")
    if size > MAX_HEADER:
        raise FieldError(f".npy header of {size} bytes exceeds {MAX_HEADER}", type="npy")
    return 8 + width + size


def write(array: np.ndarray) -> bytes:
    """The .npy file of `array` (C order, little-endian): its bytes are copied once."""
    head, data = write_parts(array)
    return b"".join((head, data)) if data.nbytes else head


def write_parts(array: np.ndarray) -> tuple[bytes, memoryview]:
    """The .npy file of `array` as its header and a byte view of the array's own memory
    (C order, little-endian: a copy only where the array is not that already), for a
    transport that writes the two without joining them."""
    array = wire_array(array)
    spec = dtypes.from_numpy(array.dtype)
    descr = "bfloat16" if spec is dtypes.BFLOAT16 else npformat.dtype_to_descr(array.dtype)
    header = {"descr": descr, "fortran_order": False, "shape": array.shape}
    fp = io.BytesIO()
    try:
        npformat.write_array_header_1_0(fp, header)
    except ValueError:  # a header over 64 KiB (very high rank): format 2.0
        fp = io.BytesIO()
        npformat.write_array_header_2_0(fp, header)
    if not array.size:
        return fp.getvalue(), memoryview(b"")
    return fp.getvalue(), memoryview(array.reshape(-1).view(np.uint8))


def wants(accept: str | None, media_type: str = NPY) -> bool:
    """Whether an Accept header prefers `media_type` over JSON.

    The highest q wins; a media type the client names outranks a wildcard of equal q,
    and between two named types of equal q the one named first wins.
    """
    if not accept:
        return False
    best_other: tuple[float, int, int] = (-1.0, 0, 0)  # (q, specificity, -position)
    mine: tuple[float, int, int] | None = None
    for position, item in enumerate(accept.split(",")):
        kind, _, params = item.strip().partition(";")
        kind = kind.strip().lower()
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        rank = (q, 0 if "*" in kind else 1, -position)
        if kind == media_type:
            mine = rank
        elif kind in ("application/json", "*/*", "application/*"):
            best_other = max(best_other, rank)
    return mine is not None and mine[0] > 0 and mine > best_other
