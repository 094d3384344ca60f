"""`tensorwire.v1.Tensor` <-> NumPy: raw little-endian bytes, checked before use.

Decoding never allocates by a client's claim: the dtype must be in the table, no dim
negative, and prod(shape) * itemsize (Python ints: no overflow) must equal the bytes
actually received before the array is made. The array is then a `frombuffer` view of
the received field, so the field's bytes are the only copy: such arrays are read-only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import dtypes
from .field_error import FieldError

#: NumPy's own limit on the number of dimensions.
MAX_RANK = 64


def check_shape(shape: tuple[int, ...]) -> None:
    if len(shape) > MAX_RANK:
        raise FieldError(f"rank {len(shape)} exceeds the limit of {MAX_RANK}",
                         type="tensor_shape")
    if any(d < 0 for d in shape):
        raise FieldError(f"shape {list(shape)} has a negative dimension", type="tensor_shape")


def to_numpy(msg: Any, strings: str = "unicode", data: Any = None) -> np.ndarray:
    """The array a Tensor message holds; `strings="object"` gives str objects (frames).

    `data`, when given, is the message's `data` field received apart from it (a view of
    the request buffer, see `tensorwire.protobuf.bytes_fields`); the array is then a view of it.
    """
    spec = dtypes.by_proto().get(msg.dtype)
    if spec is None:
        if msg.dtype == 0:
            raise FieldError("the tensor's dtype is not set", type="tensor_dtype")
        raise FieldError(f"unknown dtype number {msg.dtype}", type="tensor_dtype")
    shape = tuple(msg.shape)
    check_shape(shape)
    count = math.prod(shape)
    if data is None:
        data = msg.data
    elif msg.data:
        raise FieldError("the tensor's data arrived twice", type="tensor_value")
    if spec.is_string:
        if len(data):
            raise FieldError("a string tensor carries its elements in `strings`, not `data`",
                             type="tensor_value")
        if len(msg.strings) != count:
            raise FieldError(f"shape {list(shape)} needs {count} strings, got "
                             f"{len(msg.strings)}", type="tensor_size")
        items = list(msg.strings)
        if strings == "object":
            out = np.empty(count, dtype=object)
            out[:] = items
            return out.reshape(shape)
        return np.array(items, dtype=str).reshape(shape) if count else np.empty(shape, "<U1")
    if len(msg.strings):
        raise FieldError(f"a {spec.name} tensor carries its elements in `data`, "
                         "not `strings`", type="tensor_value")
    expected = count * spec.itemsize
    if len(data) != expected:
        raise FieldError(f"shape {list(shape)} of {spec.name} needs {expected} bytes, "
                         f"data has {len(data)}", type="tensor_size")
    return from_bytes(data, spec, shape)


def from_bytes(data: Any, spec: dtypes.DTypeSpec, shape: tuple[int, ...],
               offset: int = 0, order: str = "C") -> np.ndarray:
    """A view of already size-checked little-endian bytes as an array of `shape`."""
    dtype = spec.numpy()
    if math.prod(shape) == 0:
        return np.empty(shape, dtype)
    array = np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape, order=order)
    if spec.kind == "bool" and (array.view(np.uint8) > 1).any():
        raise FieldError("bool tensor bytes must be 0 or 1", type="tensor_value")
    return array


def wire_array(array: np.ndarray) -> np.ndarray:
    """`array` as C-contiguous little-endian elements (a no-op for the usual case)."""
    spec = dtypes.from_numpy(array.dtype)
    if spec is None:
        raise FieldError(f"dtype {array.dtype} has no tensor form", type="tensor_dtype")
    if spec.is_string:
        return array
    dtype = spec.numpy()
    if array.dtype != dtype or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array, dtype=dtype)
    return array


def fill(array: np.ndarray, msg: Any, *, split: bool = False) -> memoryview | None:
    """Write `array` into a Tensor message.

    With `split`, the data is not set but returned as a byte view of the (contiguous,
    little-endian) array, for the caller to append to the wire (`protowire`).
    """
    array = wire_array(array)
    spec = dtypes.from_numpy(array.dtype)
    assert spec is not None
    msg.dtype = spec.proto
    msg.shape.extend(array.shape)
    if spec.is_string:
        msg.strings.extend(str(s) for s in array.ravel().tolist())
    elif array.size:
        if split:
            return memoryview(array.reshape(-1).view(np.uint8))
        msg.data = array.tobytes()
    return None
