"""Tensors on the client: numpy arrays in and out, whatever the wire form.

- HTTP JSON: nested lists (`type: array` with `format: numpy-array|torch-tensor|tf-tensor`,
  or BentoML's `type: tensor`), rebuilt with the declared `dtype`;
- HTTP binary: a root tensor input is sent as a `.npy` body (`application/x-npy`), and
  tensor outputs are asked for as `.npy` (`Accept: application/x-npy`); `.npy` is written
  and read by `numpy.lib.format` with `allow_pickle=False`;
- gRPC: `tensorwire.v1.Tensor` (dtype enum, shape, raw little-endian bytes in C order;
  STRING tensors in `strings`). A received tensor's byte count is checked against
  `prod(shape) * itemsize` before the array is built.

torch and tensorflow tensors are accepted as inputs (converted through numpy without
importing either framework here); outputs are numpy arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import v1
from ..errors import ClientError, InvalidArgument
from ..wire import dtypes, npy
from ..wire import tensors as wire_tensors
from ..wire.field_error import FieldError, invalid_argument
from . import jsonkinds, protokinds
from .filedata import Body
from .response import Payload
from .values import to_numpy

TENSOR_FORMATS = frozenset({"numpy-array", "torch-tensor", "tf-tensor"})
NPY = npy.NPY


def conform(value: Any, dtype: str | None) -> np.ndarray:
    """`value` as a numpy array of the declared `dtype`, converted the way NumPy's
    `same_kind` casting allows (a list of floats or a float64 array for float32, ints
    for floats); FieldError for any other dtype (floats for an int tensor, complex for
    floats). The same rule on both protocols, so that one call has one answer: over HTTP
    JSON numbers used to be read as the declared dtype by the server while a gRPC Tensor
    must already have it. An empty array takes the dtype whatever it was.
    """
    try:
        array = to_numpy(value)
    except ValueError as exc:  # ragged nested lists
        raise FieldError(f"not a tensor: {exc}", type="tensor_shape") from None
    if dtype is None or dtype == "string" or array.dtype.hasobject:
        return array  # the server decides what an undeclared or string tensor takes
    try:
        want = _numpy_dtype(dtype)
    except ClientError:  # bfloat16 without ml_dtypes here: the server will tell
        return array
    if array.dtype == want:
        return array
    if array.size == 0 or np.can_cast(array.dtype, want, "same_kind"):
        return array.astype(want)
    raise FieldError(f"expected dtype {dtype}, got {array.dtype.name}, which NumPy's "
                     f"same_kind casting does not convert to {dtype}", type="tensor_dtype")


def tensor_summary(dtype: str | None, shape: Any) -> str:
    """`tensor[float32, shape (1, 4)]`: what `list_apis()` says, on both protocols."""
    where = f", shape {tuple(shape)}" if shape else ""
    return f"tensor[{dtype or 'any dtype'}{where}]"


def dumps_npy(value: Any) -> bytes:
    """The `.npy` body of a tensor input (the server's own writer: no pickles)."""
    array = to_numpy(value)
    if array.dtype.hasobject:
        raise InvalidArgument("object arrays cannot be sent as .npy (no pickles)")
    return npy.write(array)


def loads_npy(data: bytes) -> np.ndarray:
    """A `.npy` response, checked as the server checks the ones it reads."""
    try:
        return npy.read(data)
    except FieldError as exc:
        raise ClientError(f"the server sent an unreadable .npy body: {exc.msg}") from None


def fill_tensor(value: Any, msg: Any, loc: tuple[str | int, ...] = ()) -> None:
    """Write an array into a `tensorwire.v1.Tensor` message (any pool's class)."""
    array = to_numpy(value)
    if array.dtype.hasobject:
        if not all(isinstance(v, str) for v in array.ravel().tolist()):
            raise InvalidArgument.at(list(loc), "object arrays cannot be sent; give the "
                                     "array a numeric or string dtype", "tensor_dtype")
        array = array.astype(str)
    elif array.dtype.kind == "S":
        array = array.astype(str)
    try:
        wire_tensors.fill(array, msg)
    except FieldError as exc:
        raise InvalidArgument.at(list(loc), exc.msg, exc.type) from None


def tensor_from_proto(msg: Any) -> np.ndarray:
    """A writable, native-order array from a `tensorwire.v1.Tensor`, with the server's
    own checks (dtype known, no negative dim, byte count = shape x itemsize)."""
    try:
        array = wire_tensors.to_numpy(msg)
    except FieldError as exc:
        raise ClientError(f"the server sent an invalid tensor: {exc.msg}") from None
    return array.astype(array.dtype.newbyteorder("="), copy=True)


def _numpy_dtype(name: str) -> np.dtype[Any]:
    try:
        return dtypes.resolve(name).numpy()
    except (TypeError, ValueError) as exc:
        raise ClientError(f"cannot read a {name} tensor: {exc}") from None


# ---------------------------------------------------------------------- HTTP


class TensorKind(jsonkinds.JsonKind):
    trivial = False
    accept = f"{NPY}, application/json;q=0.9"

    def __init__(self, schema: dict[str, Any]) -> None:
        super().__init__(schema)
        self.dtype = schema.get("dtype")

    def to_json(self, value: Any) -> Any:
        return None if value is None else conform(value, self.dtype)

    def from_json(self, value: Any) -> Any:
        if value is None:
            return None
        try:
            return np.asarray(value, dtype=_numpy_dtype(self.dtype) if self.dtype else None)
        except (TypeError, ClientError):
            return np.asarray(value)

    def body(self, value: Any, files: Any) -> Body | None:
        return Body(dumps_npy(conform(value, self.dtype)), NPY)

    async def from_payload(self, payload: Payload, files: Any) -> Any:
        if payload.media_type == NPY:
            return loads_npy(await payload.read())
        return await super().from_payload(payload, files)

    def summary(self) -> str:
        return tensor_summary(self.dtype, self.schema.get("shape"))


def is_tensor_schema(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "tensor" or schema.get("format") in TENSOR_FORMATS



# ---------------------------------------------------------------------- gRPC


class TensorElement(protokinds.Message):
    """A `tensorwire.v1.Tensor` field; its options declare the dtype and shape."""

    def __init__(self, dtype: str | None = None, shape: tuple[int, ...] | None = None
                 ) -> None:
        self.dtype = dtype
        self.shape = shape

    def hinted(self, hints: v1.FieldHints) -> protokinds.Element:
        return TensorElement(hints.dtype, hints.shape)

    def fill(self, value: Any, msg: Any, loc: Any, files: Any) -> None:
        try:
            array = conform(value, self.dtype)
        except FieldError as exc:
            raise invalid_argument(exc, prefix=tuple(loc)) from None
        fill_tensor(array, msg, loc)

    def decode(self, raw: Any, files: Any) -> Any:
        return tensor_from_proto(raw)

    def summary(self) -> str:
        return tensor_summary(self.dtype, self.shape)
