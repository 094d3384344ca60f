"""Tensors as JSON: nested lists (a bare value for rank 0) <-> NumPy arrays.

JSON numbers carry no dtype, so the declared `DType` types them: a value that the dtype
cannot hold exactly in kind (1.5 for an int32, 300 for a uint8, a string for a float, a
number too large for a float16) is an error, never silently cast. Booleans read as
0/1 and 0/1 as booleans, as pydantic's lax mode reads them. Without a declared
dtype NumPy's inference applies (ints -> int64, floats -> float64, bools, strings).

Forms JSON has no literal for:
- NaN and ±infinity are written as the strings "NaN", "Infinity", "-Infinity" (strict
  JSON, what JavaScript and pydantic read); the bare tokens `NaN`/`Infinity` are read too.
  JSON cannot carry a NaN's sign or payload bits: they come back as NumPy's NaN.
- a complex element is a `[real, imag]` pair, i.e. one more trailing dimension of 2.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson

from ..wire import dtypes
from ..wire.dtypes import DTypeSpec
from ..wire.field_error import FieldError

_NONFINITE = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf,
              "-Infinity": -math.inf, "-inf": -math.inf}


def from_json(value: Any, spec: DTypeSpec | None) -> np.ndarray:
    """A NumPy array of dtype `spec` (inferred when None) from a parsed JSON value."""
    try:
        array = np.array(value)
    except ValueError:
        raise FieldError(_ragged_message(value), type="tensor_ragged") from None
    except OverflowError:
        raise FieldError("an integer is too large for any integer dtype",
                         type="tensor_value") from None
    if array.dtype.kind == "O":
        raise FieldError(_object_message(value), type="tensor_value")
    if array.dtype.kind == "U":
        # NumPy stringifies numbers that sit beside strings: look at the JSON itself.
        if spec is not None and spec.kind in ("float", "complex"):
            array = _floats_with_nonfinite(value, array.shape)
        elif _has(value, lambda v: not isinstance(v, str)):
            raise FieldError("tensor elements must be numbers, booleans or strings of one "
                             "kind", type="tensor_value")
    if spec is None:
        return array
    if array.size == 0:  # `[]` says nothing about its element type
        shape = array.shape
        if spec.kind == "complex" and shape and shape[-1] == 2:
            shape = shape[:-1]
        return np.empty(shape, spec.numpy() if not spec.is_string else "<U1")
    if spec.kind == "complex":
        return _complex(array, spec)
    return cast(array, spec, value)


def cast(array: np.ndarray, spec: DTypeSpec, source: Any = None) -> np.ndarray:
    """`array` (as NumPy inferred it from JSON `source`) in dtype `spec`, checked for
    exactness."""
    kind = array.dtype.kind
    target = spec.numpy()
    if spec.kind == "string":
        if kind != "U":
            raise _kind_error(array, spec)
        return array
    if kind == "U":
        raise _kind_error(array, spec)
    if spec.kind == "bool":
        # As pydantic's lax mode reads a bool: true/false, or the integers 0 and 1.
        if kind in "iu" and array.size and ((array == 0) | (array == 1)).all():
            return array.astype(np.bool_)
        if kind != "b":
            raise _kind_error(array, spec)
        return array
    # Numbers take booleans as 0 and 1 (pydantic's lax int/float do; NumPy mixes so).
    if spec.kind in ("int", "uint"):
        if kind == "f" and not (np.all(np.isfinite(array))
                                and np.all(array == np.trunc(array))):
            raise FieldError(f"{spec.name} elements must be whole numbers",
                             type="tensor_dtype")
        info = np.iinfo(target)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise FieldError(f"a value is out of range for {spec.name} "
                             f"[{info.min}, {info.max}]", type="tensor_value")
        if kind == "f" and source is not None:
            # NumPy infers float64 for ints beyond int64 beside small ones (2**63 + 1, 0):
            # convert the JSON numbers themselves, exactly.
            try:
                return np.array(source, dtype=target)
            except OverflowError:
                raise FieldError(f"a value is out of range for {spec.name} "
                                 f"[{info.min}, {info.max}]", type="tensor_value") from None
        return array.astype(target)
    # float
    if spec.itemsize == 8 or not array.size:  # nothing JSON holds overflows a float64
        return array.astype(target)
    with np.errstate(over="ignore"):
        out = array.astype(target)
    # only a non-finite result can be an overflow: one check in the usual case
    if not np.isfinite(out).all():
        overflow = np.isinf(out.astype(np.float64)) & np.isfinite(array.astype(np.float64))
        if overflow.any():
            raise FieldError(f"a value is out of range for {spec.name}", type="tensor_value")
    return out


def _complex(array: np.ndarray, spec: DTypeSpec) -> np.ndarray:
    if array.ndim == 0 or array.shape[-1] != 2:
        raise FieldError(f"{spec.name} elements are [real, imag] pairs: the innermost "
                         f"lists must have 2 numbers, got shape {array.shape}",
                         type="tensor_shape")
    half = dtypes.BY_NAME["float32" if spec.name == "complex64" else "float64"]
    parts = np.ascontiguousarray(cast(array, half))
    return parts.view(spec.numpy())[..., 0]


def _floats_with_nonfinite(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Numbers mixed with "NaN"/"Infinity" strings, read from the JSON leaves."""
    out: list[float] = []
    stack = [value]
    while stack:  # depth-first, left to right: C order
        v = stack.pop()
        if isinstance(v, list | tuple):
            stack.extend(reversed(v))
        elif isinstance(v, str):
            special = _NONFINITE.get(v)
            if special is None:
                raise FieldError(f"{v!r} is not a number (non-finite values are written "
                                 '"NaN", "Infinity", "-Infinity")', type="tensor_dtype")
            out.append(special)
        elif isinstance(v, bool) or not isinstance(v, int | float):
            raise FieldError(f"expected numbers, got {type(v).__name__}",
                             type="tensor_dtype")
        else:
            out.append(float(v))
    return np.array(out, dtype=np.float64).reshape(shape)


def _object_message(value: Any) -> str:
    if _has(value, lambda v: v is None):
        return "null is not a tensor element"
    if _has(value, lambda v: isinstance(v, dict)):
        return "objects are not tensor elements"
    return "tensor elements must be numbers, booleans or strings of one kind"


def _has(value: Any, pred: Any) -> bool:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif pred(v):
            return True
    return False


def _ragged_message(value: Any) -> str:
    """Where nested lists stop being rectangular (only computed on the error path)."""
    level: list[tuple[str, Any]] = [("", value)]
    while level:
        lists = [(p, v) for p, v in level if isinstance(v, list | tuple)]
        if not lists:
            break
        if len(lists) != len(level):
            path, _ = next((p, v) for p, v in level if not isinstance(v, list | tuple))
            where, first = lists[0][0], lists[0]
            return (f"ragged nested lists: {path or 'the value'} is a number where "
                    f"{where or 'the value'} is a list (len {len(first[1])})")
        lengths = {len(v) for _, v in lists}
        if len(lengths) > 1:
            (p0, v0) = lists[0]
            p1, v1 = next((p, v) for p, v in lists if len(v) != len(v0))
            return (f"ragged nested lists: {p1 or 'the value'} has {len(v1)} elements "
                    f"where {p0 or 'the value'} has {len(v0)}")
        level = [(f"{p}[{i}]", item) for p, v in lists for i, item in enumerate(v)]
    return "ragged nested lists: every row must have the same length"


def _kind_error(array: np.ndarray, spec: DTypeSpec) -> FieldError:
    got = {"b": "booleans", "i": "integers", "u": "integers", "f": "numbers",
           "U": "strings"}.get(array.dtype.kind, array.dtype.name)
    return FieldError(f"expected {spec.name} elements, got {got}", type="tensor_dtype")


# ---------------------------------------------------------------------- output


def dumps(array: np.ndarray) -> bytes | None:
    """JSON text of a real, finite array straight from its buffer (orjson), else None.

    Floats are widened to float64 first: orjson then writes each value's shortest
    float64 form, which reads back to the very same float16/float32 (a float32's own
    shortest form, read as float64 and rounded again, need not).
    """
    spec = dtypes.from_numpy(array.dtype)
    if spec is None or array.ndim == 0 or spec.kind in ("complex", "string"):
        return None
    if spec.kind == "float":
        if array.size and not _finite(array):
            return None
        array = array.astype(np.float64)
    return orjson.dumps(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")),
                        option=orjson.OPT_SERIALIZE_NUMPY)



def _finite(array: np.ndarray) -> bool:
    """Whether every value is finite. NumPy warns ("invalid value") on the NaNs of the
    float types it does not own (ml_dtypes' bfloat16, kind "V"), and a NaN here only
    means the answer is written another way: silenced for those alone, since errstate
    costs about 2 us a call."""
    if array.dtype.kind != "V":
        return bool(np.isfinite(array).all())
    with np.errstate(invalid="ignore"):
        return bool(np.isfinite(array).all())


def to_json(array: np.ndarray) -> Any:
    """Nested lists (or a bare value for rank 0) of Python values for a JSON encoder."""
    spec = dtypes.from_numpy(array.dtype)
    if spec is None:
        raise FieldError(f"dtype {array.dtype} has no tensor form", type="tensor_dtype")
    if spec.kind == "complex":
        half = np.float32 if spec.name == "complex64" else np.float64
        array = np.stack([array.real.astype(half), array.imag.astype(half)], axis=-1)
    elif spec is dtypes.BFLOAT16:
        array = array.astype(np.float32)
    if array.dtype.kind == "f" and array.size and not np.isfinite(array).all():
        return _with_nonfinite_strings(array)
    return array.tolist()


def _with_nonfinite_strings(array: np.ndarray) -> Any:
    out = array.astype(object)
    out[np.isnan(array)] = "NaN"
    out[np.isposinf(array)] = "Infinity"
    out[np.isneginf(array)] = "-Infinity"
    return out.tolist()
