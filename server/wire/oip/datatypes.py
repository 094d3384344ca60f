"""The OIP datatype table, shapes, and the one error type of the protocol.

Every other module of the package names tensors' element types through `Datatype` and
refuses a client's shape through `check_shape`, so the limits (rank, addressable span)
and the messages are the same for raw bytes, typed contents, JSON and HTTP bodies.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from ...errors import InvalidArgument, Unimplemented

#: The HTTP header giving the length of the JSON header of a binary-extension body.
INFERENCE_HEADER_CONTENT_LENGTH: Final = "Inference-Header-Content-Length"
#: What a server that speaks the binary extension lists in `/v2` `extensions`.
BINARY_EXTENSION: Final = "binary_tensor_data"
#: NumPy's own limit on the number of dimensions (as `tensorwire.v1` tensors).
MAX_RANK: Final = 64
#: The largest byte span NumPy can address (an intp): no shape may describe more,
#: even a shape with a zero dimension.
_MAX_SPAN: Final = int(np.iinfo(np.intp).max)
#: A BYTES element's length prefix: 4 bytes, little-endian, unsigned.
LENGTH_PREFIX = struct.Struct("<I")
#: The largest BYTES element the 4-byte length can state.
MAX_ELEMENT: Final = 0xFFFFFFFF

Kind = Literal["bool", "uint", "int", "float", "bytes"]


class OIPError(InvalidArgument):
    """The request breaks the Open Inference Protocol.

    One type for every protocol violation; the message names the tensor (or the part
    of the body) at fault, and `detail` carries it as a `loc` for tensorwire's clients.
    """

    @classmethod
    def tensor(cls, name: str, msg: str) -> OIPError:
        """A violation in one tensor: `input 'x': <msg>`."""
        return cls(f"input {name!r}: {msg}",
                   detail=[{"loc": ["inputs", name], "msg": msg, "type": "value_error"}])

    @classmethod
    def output(cls, name: str, msg: str) -> OIPError:
        """An output that cannot be sent the way the client asked: `output 'y': <msg>`."""
        return cls(f"output {name!r}: {msg}",
                   detail=[{"loc": ["outputs", name], "msg": msg, "type": "value_error"}])

    @classmethod
    def body(cls, msg: str) -> OIPError:
        """A violation of the request as a whole (its framing, its JSON header)."""
        return cls(msg, detail=[{"loc": [], "msg": msg, "type": "value_error"}])


# --- the datatype table -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Datatype:
    """One OIP element type under every name the wire gives it."""

    #: The OIP name ("FP32").
    name: str
    kind: Kind
    #: Bytes per element in raw form; 0 for BYTES (each element is length + bytes).
    itemsize: int
    #: The NumPy dtype name: "bfloat16" is ml_dtypes', "object" holds BYTES elements.
    numpy_name: str
    #: The `InferTensorContents` field that carries it; None for FP16 and BF16 (raw only).
    contents_field: str | None

    def numpy_dtype(self) -> np.dtype[Any]:
        """The little-endian NumPy dtype of the elements (BF16 needs ml_dtypes).

        Memoised: every tensor of every request asks (a NumPy dtype is made in Python).
        """
        dtype = _NUMPY_DTYPES.get(self.name)
        if dtype is None:
            if self.name == "BF16":
                dtype = _bfloat16()
            elif self.name == "BYTES":
                dtype = np.dtype(object)
            else:
                dtype = np.dtype(self.numpy_name).newbyteorder("<")
            _NUMPY_DTYPES[self.name] = dtype
        return dtype

    def __str__(self) -> str:
        return self.name


DATATYPES: Final[dict[str, Datatype]] = {d.name: d for d in (
    Datatype("BOOL", "bool", 1, "bool", "bool_contents"),
    Datatype("UINT8", "uint", 1, "uint8", "uint_contents"),
    Datatype("UINT16", "uint", 2, "uint16", "uint_contents"),
    Datatype("UINT32", "uint", 4, "uint32", "uint_contents"),
    Datatype("UINT64", "uint", 8, "uint64", "uint64_contents"),
    Datatype("INT8", "int", 1, "int8", "int_contents"),
    Datatype("INT16", "int", 2, "int16", "int_contents"),
    Datatype("INT32", "int", 4, "int32", "int_contents"),
    Datatype("INT64", "int", 8, "int64", "int64_contents"),
    Datatype("FP16", "float", 2, "float16", None),
    Datatype("BF16", "float", 2, "bfloat16", None),
    Datatype("FP32", "float", 4, "float32", "fp32_contents"),
    Datatype("FP64", "float", 8, "float64", "fp64_contents"),
    Datatype("BYTES", "bytes", 0, "object", "bytes_contents"),
)}
BYTES: Final = DATATYPES["BYTES"]

#: Every `InferTensorContents` field, and the NumPy type its repeated values have.
CONTENTS_FIELDS: Final[dict[str, str]] = {
    "bool_contents": "bool", "int_contents": "int32", "int64_contents": "int64",
    "uint_contents": "uint32", "uint64_contents": "uint64", "fp32_contents": "float32",
    "fp64_contents": "float64", "bytes_contents": "object",
}

_BY_NUMPY: Final[dict[str, Datatype]] = {
    d.numpy_name: d for d in DATATYPES.values() if d.kind != "bytes"}
_NUMPY_DTYPES: dict[str, np.dtype[Any]] = {}
#: `datatype_of` answers by dtype: NumPy computes a dtype's name in Python, a few us a
#: call, and the same few dtypes recur on every request. Bounded (clients pick dtypes).
_OF_DTYPE: dict[np.dtype[Any], Datatype] = {}
_OF_DTYPE_MAX: Final = 256


def _bfloat16() -> np.dtype[Any]:
    try:
        import ml_dtypes
    except ImportError as exc:  # an optional dependency (the `torch` extra brings it)
        raise Unimplemented("BF16 tensors need the ml_dtypes package on the server") from exc
    return np.dtype(ml_dtypes.bfloat16)


def datatype(name: str | Datatype, tensor: str) -> Datatype:
    """The datatype a client named for `tensor`; OIPError naming the known ones if none."""
    if isinstance(name, Datatype):
        return name
    found = DATATYPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise OIPError.tensor(tensor, f"unknown datatype {name!r}; known: "
                                      f"{', '.join(DATATYPES)}")
    return found


def datatype_of(dtype: np.dtype[Any]) -> Datatype:
    """The datatype an array of `dtype` travels as: str/bytes/object arrays as BYTES.

    Raises TypeError for dtypes the protocol has no type for (complex, datetime, ...).
    """
    if isinstance(dtype, np.dtype):
        found = _OF_DTYPE.get(dtype)
        if found is not None:
            return found
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return BYTES
    # ml_dtypes' bfloat16 is recognised by name, so this never imports ml_dtypes.
    found = _BY_NUMPY.get(dtype.name)
    if found is None or (dtype.kind == "V" and dtype.name != "bfloat16"):
        raise TypeError(f"NumPy dtype {dtype} has no Open Inference Protocol datatype")
    if len(_OF_DTYPE) < _OF_DTYPE_MAX:
        _OF_DTYPE[dtype] = found
    return found


# --- shapes -------------------------------------------------------------------------


def check_shape(shape: Any, name: str, dt: Datatype | None = None) -> tuple[int, ...]:
    """A client's shape as a tuple, refused unless every dim is a non-negative integer,
    the rank is at most MAX_RANK and the shape spans an addressable number of bytes
    (so that even a shape with a zero dim cannot make NumPy fail later)."""
    if isinstance(shape, (str, bytes, dict)):
        raise OIPError.tensor(name, f"shape must be a list of integers, got {shape!r}")
    try:
        dims = tuple(shape)
    except TypeError:  # not iterable
        raise OIPError.tensor(name, f"shape must be a list of integers, got {shape!r}"
                              ) from None
    if len(dims) > MAX_RANK:
        raise OIPError.tensor(name, f"rank {len(dims)} exceeds the limit of {MAX_RANK}")
    if not all(type(d) is int for d in dims):  # plain ints (protobuf's, JSON's) pass fast
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
                raise OIPError.tensor(name, f"shape must be a list of integers, got "
                                            f"{list(dims)}")
        dims = tuple(int(d) for d in dims)
    if dims and min(dims) < 0:
        raise OIPError.tensor(name, f"shape {list(dims)} has a negative dimension")
    span = (dt.itemsize if dt and dt.itemsize else 8)
    for d in dims:
        span *= d or 1
    if span > _MAX_SPAN:
        raise OIPError.tensor(name, f"shape {list(dims)} is too large")
    return dims



def check_unique(names: Sequence[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise OIPError.body(f"the request names {what} {n!r} twice")
        seen.add(n)

