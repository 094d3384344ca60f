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

import io
import math
from typing import Any

from .. import v1
from ..errors import ClientError, InvalidArgument
from ..wire.field_error import FieldError, invalid_argument
from . import jsonkinds, protokinds
from .response import Payload

TENSOR_FORMATS = frozenset({"numpy-array", "torch-tensor", "tf-tensor"})
NPY = "application/x-npy"


def to_numpy(value: Any) -> Any:
    """A numpy array from an array, a torch/tf tensor or nested lists."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__ or ""
    if module.startswith("torch"):
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            try:
                import ml_dtypes

                return tensor.view(dtype=_torch_int16()).numpy().view(ml_dtypes.bfloat16)
            except ImportError:
                tensor = tensor.float()
        return tensor.numpy()
    if module.startswith("tensorflow") and hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def conform(value: Any, dtype: str | None) -> Any:
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
    import numpy as np

    if array.size == 0 or np.can_cast(array.dtype, want, "same_kind"):
        return array.astype(want)
    raise FieldError(f"expected dtype {dtype}, got {array.dtype.name}, which NumPy's "
                     f"same_kind casting does not convert to {dtype}", type="tensor_dtype")


def tensor_summary(dtype: str | None, shape: Any) -> str:
    """`tensor[float32, shape (1, 4)]`: what `list_apis()` says, on both protocols."""
    where = f", shape {tuple(shape)}" if shape else ""
    return f"tensor[{dtype or 'any dtype'}{where}]"


def _torch_int16() -> Any:
    import torch

    return torch.int16


def dumps_npy(value: Any) -> bytes:
    import numpy as np

    array = to_numpy(value)
    if array.dtype.hasobject:
        raise InvalidArgument("object arrays cannot be sent as .npy (no pickles)")
    out = io.BytesIO()
    np.lib.format.write_array(out, np.asanyarray(array), allow_pickle=False)
    return out.getvalue()


def loads_npy(data: bytes) -> Any:
    import numpy as np

    try:
        return np.lib.format.read_array(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        raise ClientError(f"the server sent an unreadable .npy body: {exc}") from None


# ---------------------------------------------------------------------- dtypes


def _dtype_enum() -> Any:
    return v1.DType


def _numpy_dtype(name: str) -> Any:
    import numpy as np

    if name == "bfloat16":
        try:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            raise ClientError("the server sent a bfloat16 tensor: install ml_dtypes to "
                              "read it") from None
    return np.dtype(name)


def fill_tensor(value: Any, msg: Any, loc: tuple[str | int, ...] = ()) -> None:
    """Write an array into a `tensorwire.v1.Tensor` message (any pool's class)."""
    import numpy as np

    array = to_numpy(value)
    msg.SetInParent()
    msg.shape.extend(array.shape)
    dtypes = _dtype_enum().values_by_name
    if array.dtype.kind in "US" or (array.dtype.hasobject and all(
            isinstance(v, str) for v in array.ravel().tolist())):
        msg.dtype = dtypes["STRING"].number
        msg.strings.extend(str(v) for v in array.ravel().tolist())
        return
    if array.dtype.hasobject:
        raise InvalidArgument.at(list(loc), "object arrays cannot be sent; give the array a "
                                 "numeric or string dtype", "tensor_dtype")
    name = "bfloat16" if array.dtype.name == "bfloat16" else array.dtype.name
    entry = dtypes.get(name.upper())
    if entry is None:
        raise InvalidArgument.at(list(loc), f"dtype {array.dtype} has no tensorwire.v1.DType",
                                 "tensor_dtype")
    msg.dtype = entry.number
    little = array.astype(array.dtype.newbyteorder("<"), copy=False)
    msg.data = np.ascontiguousarray(little).tobytes()


def tensor_from_proto(msg: Any) -> Any:
    """A (writable, native byte order) numpy array from a `tensorwire.v1.Tensor`."""
    import numpy as np

    entry = _dtype_enum().values_by_number.get(msg.dtype)
    shape = tuple(msg.shape)
    if entry is None or entry.name == "DTYPE_UNSPECIFIED":
        raise ClientError(f"the server sent a tensor of unknown dtype {msg.dtype}")
    if any(d < 0 for d in shape):
        raise ClientError(f"the server sent a tensor of negative shape {shape}")
    if entry.name == "STRING":
        strings = list(msg.strings)
        if len(strings) != math.prod(shape):
            raise ClientError(f"the server sent {len(strings)} strings for shape {shape}")
        return np.array(strings, dtype=str).reshape(shape)
    dtype = _numpy_dtype(entry.name.lower())
    data = msg.data
    if math.prod(shape) * dtype.itemsize != len(data):
        raise ClientError(f"the server sent {len(data)} bytes for a {dtype} tensor of "
                          f"shape {shape}")
    wire = np.frombuffer(data, dtype=dtype.newbyteorder("<")).reshape(shape)
    return wire.astype(dtype.newbyteorder("="), copy=True)


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
        import numpy as np

        if value is None:
            return None
        try:
            return np.asarray(value, dtype=_numpy_dtype(self.dtype) if self.dtype else None)
        except (TypeError, ClientError):
            return np.asarray(value)

    def body(self, value: Any, files: Any) -> jsonkinds.Body | None:
        return jsonkinds.Body(dumps_npy(conform(value, self.dtype)), NPY)

    async def from_payload(self, payload: Payload, files: Any) -> Any:
        if payload.media_type == NPY:
            return loads_npy(await payload.read())
        return await super().from_payload(payload, files)

    def summary(self) -> str:
        return tensor_summary(self.dtype, self.schema.get("shape"))


def _is_tensor_schema(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "tensor" or schema.get("format") in TENSOR_FORMATS


jsonkinds.register_schema_kind(_is_tensor_schema, TensorKind)


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


protokinds.register_message_kind("tensorwire.v1.Tensor", lambda desc: TensorElement())
