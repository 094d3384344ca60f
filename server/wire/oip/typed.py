"""Typed tensors: `InferTensorContents` fields (gRPC) and KServe v2 JSON `data` (HTTP).

Both are lists of values on the wire; each is checked for count, element type and
range against the datatype before it becomes an array.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Final

import numpy as np

from .datatypes import (
    BYTES,
    CONTENTS_FIELDS,
    MAX_RANK,
    Datatype,
    Kind,
    OIPError,
    check_shape,
    datatype,
    datatype_of,
)
from .raw import element_bytes


def array_from_contents(contents: Any, datatype_name: str | Datatype, shape: Any,
                        name: str) -> np.ndarray:
    """The tensor an `InferTensorContents` message holds in its datatype's field.

    The field must hold exactly prod(shape) values and every other field none; values
    of narrow types (INT8/16, UINT8/16 travel as 32-bit) must fit the type. FP16 and
    BF16 have no typed field and are refused: they travel raw.
    """
    dt = datatype(datatype_name, name)
    dims = check_shape(shape, name, dt)
    if dt.contents_field is None:
        raise OIPError.tensor(name, f"{dt.name} has no typed contents field; send it in "
                                    "raw_input_contents")
    for other in CONTENTS_FIELDS:
        if other != dt.contents_field and len(getattr(contents, other)):
            raise OIPError.tensor(name, f"a {dt.name} tensor carries its values in "
                                        f"{dt.contents_field}, not {other}")
    values = getattr(contents, dt.contents_field)
    count = math.prod(dims)
    if len(values) != count:
        raise OIPError.tensor(name, f"{dt.contents_field} has {len(values)} values, but "
                                    f"shape {list(dims)} needs {count}")
    if dt is BYTES:
        return np.fromiter(values, dtype=object, count=count).reshape(dims)
    wide = np.fromiter(values, dtype=CONTENTS_FIELDS[dt.contents_field], count=count)
    target = dt.numpy_dtype()
    if wide.dtype.itemsize > target.itemsize and count:
        info = np.iinfo(target)
        if wide.min() < info.min or wide.max() > info.max:
            raise OIPError.tensor(name, f"{dt.contents_field} holds values outside "
                                        f"{dt.name}'s range [{info.min}, {info.max}]")
    return wide.astype(target, copy=False).reshape(dims)


def contents_from_array(arr: Any, contents: Any) -> tuple[str, list[int]]:
    """Write an array into an (empty) `InferTensorContents` message's typed field.

    Returns (datatype, shape). Raises TypeError for FP16/BF16 (raw only) and for dtypes
    the protocol cannot carry.
    """
    array = np.asarray(arr)
    dt = datatype_of(array.dtype)
    if dt.contents_field is None:
        raise TypeError(f"{dt.name} has no typed contents field; use raw contents")
    flat = array.ravel(order="C").tolist()
    if dt is BYTES:
        flat = [element_bytes(x) for x in flat]
    getattr(contents, dt.contents_field).extend(flat)
    return dt.name, [int(d) for d in array.shape]


# --- JSON data ------------------------------------------------------------------------

_JSON_TYPES: Final[dict[Kind, tuple[type, ...]]] = {
    "bool": (bool,), "uint": (int,), "int": (int,), "float": (int, float), "bytes": (str,),
}
_JSON_WORDS: Final[dict[Kind, str]] = {
    "bool": "JSON booleans", "uint": "JSON integers", "int": "JSON integers",
    "float": "JSON numbers", "bytes": "JSON strings",
}


def _flatten(data: Any, name: str) -> tuple[list[Any], set[type]]:
    """Row-major leaves of flat or nested lists (as Triton, the nesting is not checked
    against the shape, only the count), and the set of their Python types."""
    if not isinstance(data, list):
        raise OIPError.tensor(name, f"data must be a list, got {type(data).__name__}")
    level: list[Any] = data
    for _ in range(MAX_RANK + 1):
        types = set(map(type, level))
        if list not in types:
            return level, types
        if types != {list}:
            raise OIPError.tensor(name, "data mixes lists and values at one nesting level")
        level = list(itertools.chain.from_iterable(level))
    raise OIPError.tensor(name, f"data is nested deeper than {MAX_RANK} levels")


def array_from_json(data: Any, datatype_name: str | Datatype, shape: Any,
                    name: str) -> np.ndarray:
    """The tensor a KServe v2 JSON `data` member holds (parsed JSON: lists of values).

    `data` is row-major, flat or nested; it must hold exactly prod(shape) elements of
    the datatype's JSON type: booleans for BOOL, integers in range for the integer
    types, numbers for the float types (refused where they overflow FP16/BF16/FP32),
    strings for BYTES (UTF-8 encoded into an object array of `bytes`).
    """
    dt = datatype(datatype_name, name)
    dims = check_shape(shape, name, dt)
    flat, types = _flatten(data, name)
    count = math.prod(dims)
    if len(flat) != count:
        raise OIPError.tensor(name, f"data has {len(flat)} elements, but shape "
                                    f"{list(dims)} needs {count}")
    allowed = _JSON_TYPES[dt.kind]
    # bool is an int subclass in Python, but never a number in an OIP tensor.
    if any(not issubclass(t, allowed) or (t is bool and dt.kind != "bool") for t in types):
        raise OIPError.tensor(name, f"{dt.name} data must be {_JSON_WORDS[dt.kind]}")
    if dt is BYTES:
        out = np.empty(count, dtype=object)
        out[:] = [s.encode("utf-8") for s in flat]
        return out.reshape(dims)
    target = dt.numpy_dtype()
    if dt.kind in ("int", "uint") and flat:
        info = np.iinfo(target)
        low, high = min(flat), max(flat)
        if low < info.min or high > info.max:
            raise OIPError.tensor(name, f"data holds {low if low < info.min else high}, "
                                        f"outside {dt.name}'s range [{info.min}, {info.max}]")
    if dt.kind == "float":
        try:
            source = np.array(flat, dtype=np.float64)
        except OverflowError:  # a Python int beyond any float
            raise OIPError.tensor(name, f"data holds a number outside {dt.name}'s range"
                                  ) from None
        with np.errstate(over="ignore"):
            arr = source.astype(target, copy=False)
        if count and not np.isfinite(arr).all():
            bad = ~np.isfinite(arr) & np.isfinite(source)
            if bad.any():
                value = float(source[bad][0])
                raise OIPError.tensor(name, f"data holds {value!r}, outside {dt.name}'s range")
        return arr.reshape(dims)
    return np.array(flat, dtype=target).reshape(dims)


def json_from_array(arr: Any, name: str) -> tuple[str, list[int], list[Any]]:
    """(datatype, shape, flat row-major data list) of an array, for a JSON response.

    BYTES elements become strings, so they must be valid UTF-8; floats must be finite,
    since JSON has no NaN or infinity (orjson would write `null`). Either failure raises
    OIPError naming the output: the client can ask for it with `binary_data`.
    """
    array = np.asarray(arr)
    dt = datatype_of(array.dtype)
    shape = [int(d) for d in array.shape]
    flat = array.ravel(order="C")
    if dt is BYTES:
        data: list[Any] = []
        for item in flat.tolist():
            if isinstance(item, str):
                data.append(item)
                continue
            try:
                data.append(element_bytes(item).decode("utf-8"))
            except UnicodeDecodeError:
                raise OIPError.output(name, "BYTES elements that are not UTF-8 cannot be "
                                            "JSON; request it with binary_data") from None
        return dt.name, shape, data
    if dt.kind == "float":
        wide = flat.astype(np.float64)
        if not np.isfinite(wide).all():
            raise OIPError.output(name, "holds NaN or infinity, which JSON cannot carry; "
                                        "request it with binary_data")
        return dt.name, shape, wide.tolist()
    return dt.name, shape, flat.tolist()
