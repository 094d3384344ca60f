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

from ..errors import ClientError, InvalidArgument
from ..wire import dtypes, npy
from ..wire import tensors as wire_tensors
from ..wire.field_error import FieldError
from . import jsonkinds, protokinds
from .filedata import Body
from .response import Payload
from .values import to_numpy

TENSOR_FORMATS = frozenset({"numpy-array", "torch-tensor", "tf-tensor"})
NPY = npy.NPY


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
        return None if value is None else to_numpy(value)

    def from_json(self, value: Any) -> Any:
        if value is None:
            return None
        try:
            return np.asarray(value, dtype=_numpy_dtype(self.dtype) if self.dtype else None)
        except (TypeError, ClientError):
            return np.asarray(value)

    def body(self, value: Any, files: Any) -> Body | None:
        return Body(dumps_npy(value), NPY)

    async def from_payload(self, payload: Payload, files: Any) -> Any:
        if payload.media_type == NPY:
            return loads_npy(await payload.read())
        return await super().from_payload(payload, files)

    def summary(self) -> str:
        dtype = self.schema.get("dtype") or "any dtype"
        shape = self.schema.get("shape")
        return f"tensor[{dtype}{', shape ' + str(tuple(shape)) if shape else ''}]"


def is_tensor_schema(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "tensor" or schema.get("format") in TENSOR_FORMATS



# ---------------------------------------------------------------------- gRPC


class TensorElement(protokinds.Message):
    def fill(self, value: Any, msg: Any, loc: Any, files: Any) -> None:
        fill_tensor(value, msg, loc)

    def decode(self, raw: Any, files: Any) -> Any:
        return tensor_from_proto(raw)

    def summary(self) -> str:
        return "tensor"

