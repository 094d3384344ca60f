"""Raw tensor bytes: gRPC `raw_input_contents` / `raw_output_contents` and the data of
Triton's HTTP binary extension.

Arrays are zero-copy `frombuffer` views of the received buffer; the byte count is
compared with prod(shape) x itemsize before anything exists. BYTES elements are a
4-byte little-endian length followed by the bytes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .datatypes import (
    BYTES,
    LENGTH_PREFIX,
    MAX_ELEMENT,
    Datatype,
    OIPError,
    check_shape,
    datatype,
    datatype_of,
)


def byte_view(buf: Any) -> memoryview:
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def array_from_raw(buf: Any, datatype_name: str | Datatype, shape: Any,
                   name: str) -> np.ndarray:
    """The tensor that raw protocol bytes hold, as a zero-copy view of `buf`.

    `buf` is any bytes-like object (bytes, bytearray, a memoryview slice of a body).
    Fixed-size types: exactly prod(shape) x itemsize bytes, little-endian, row-major;
    BOOL bytes must be 0 or 1. BYTES: each element a 4-byte little-endian length and
    its bytes, exactly prod(shape) elements and nothing after them; the result is an
    object array of `bytes`. Raises OIPError naming `name` on any mismatch.
    """
    dt = datatype(datatype_name, name)
    dims = check_shape(shape, name, dt)
    view = byte_view(buf)
    if dt is BYTES:
        return _bytes_from_raw(view, dims, name)
    count = math.prod(dims)
    expected = count * dt.itemsize
    if view.nbytes != expected:
        raise OIPError.tensor(name, f"has {view.nbytes} bytes of data, but shape "
                                    f"{list(dims)} of {dt.name} needs {expected}")
    dtype = dt.numpy_dtype()
    if count == 0:
        return np.empty(dims, dtype)
    if dt.kind == "bool":
        raw = np.frombuffer(view, dtype=np.uint8)
        if raw.max() > 1:
            raise OIPError.tensor(name, "BOOL elements must be the bytes 0 or 1")
        return raw.view(dtype).reshape(dims)
    return np.frombuffer(view, dtype=dtype).reshape(dims)


def _bytes_from_raw(view: memoryview, dims: tuple[int, ...], name: str) -> np.ndarray:
    count = math.prod(dims)
    total = view.nbytes
    if count * LENGTH_PREFIX.size > total:
        raise OIPError.tensor(name, f"shape {list(dims)} declares {count} BYTES elements, "
                                    f"which need at least {count * LENGTH_PREFIX.size} bytes, "
                                    f"but there are {total}")
    out = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        if offset + LENGTH_PREFIX.size > total:
            raise OIPError.tensor(name, f"BYTES element {i} is truncated: its 4-byte "
                                        f"length starts at byte {offset} of {total}")
        (length,) = LENGTH_PREFIX.unpack_from(view, offset)
        offset += LENGTH_PREFIX.size
        end = offset + length
        if end > total:
            raise OIPError.tensor(name, f"BYTES element {i} is truncated: it claims "
                                        f"{length} bytes, {total - offset} remain")
        out[i] = view[offset:end].tobytes()
        offset = end
    if offset != total:
        raise OIPError.tensor(name, f"{total - offset} bytes follow the {count} BYTES "
                                    f"elements of shape {list(dims)}")
    return out.reshape(dims)


def element_bytes(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise TypeError(f"a BYTES element must be str or bytes, got {type(item).__name__}")


def serialize_bytes(arr: np.ndarray) -> bytes:
    """BYTES elements (str encoded UTF-8, or bytes) in the length-prefixed wire form."""
    parts: list[bytes] = []
    for item in np.asarray(arr).ravel(order="C").tolist():
        data = element_bytes(item)
        if len(data) > MAX_ELEMENT:
            raise ValueError(f"a BYTES element of {len(data)} bytes exceeds 2**32 - 1")
        parts.append(LENGTH_PREFIX.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def raw_from_array(arr: Any) -> tuple[str, list[int], memoryview | bytes]:
    """(datatype, shape, raw bytes) of an array, for raw contents or a binary body.

    A C-contiguous little-endian array is not copied: the bytes are a `memoryview` of
    its memory (format "B", so len() is the byte count; it keeps the array alive).
    Other layouts are made contiguous once. BYTES (object, bytes or str arrays) are
    serialised with their length prefixes into new `bytes`. Raises TypeError for
    dtypes the protocol cannot carry.
    """
    array = np.asarray(arr)
    dt = datatype_of(array.dtype)
    shape = [int(d) for d in array.shape]
    if dt is BYTES:
        return dt.name, shape, serialize_bytes(array)
    wire = dt.numpy_dtype()
    if array.dtype != wire or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array, dtype=wire)
    return dt.name, shape, memoryview(array.reshape(-1).view(np.uint8))

