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
from typing import Any

import numpy as np
from numpy.lib import format as npformat

from . import dtypes
from .field_error import FieldError
from .tensors import check_shape, from_bytes, wire_array

NPY = "application/x-npy"
MAX_HEADER = 10_000
_MAGIC = b"\x93NUMPY"


def read(data: bytes | bytearray | memoryview, declared: dtypes.DTypeSpec | None = None
         ) -> np.ndarray:
    """The array in a .npy body; FieldError for anything but a plain numeric/str array.

    `np.save` writes bfloat16 arrays as anonymous 2-byte voids (`|V2`); where the
    declared dtype is bfloat16 such a file is read as bfloat16.
    """
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
    offset = fp.tell()
    expected = math.prod(shape) * dtype.itemsize
    if len(data) - offset != expected:
        raise FieldError(f"the .npy header says shape {list(shape)} of {dtype.str} "
                         f"({expected} bytes) but {len(data) - offset} bytes follow",
                         type="tensor_size")
    order = "F" if fortran_order else "C"
    if spec.is_string or dtype.byteorder == ">":
        flat = np.frombuffer(data, dtype=dtype, offset=offset) if expected else \
            np.empty(0, dtype)
        array = flat.reshape(shape, order=order)
        if dtype.byteorder == ">":  # one copy into little-endian (native) order
            array = array.astype(dtype.newbyteorder("<"))
        if spec.is_string:
            _check_text(array)
    else:
        array = from_bytes(data, spec, shape, offset=offset, order=order)
    return array


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
        return fp.getvalue()
    return b"".join((fp.getvalue(), memoryview(array.reshape(-1).view(np.uint8))))


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
