"""NumPy, torch and TensorFlow behind one small interface, each imported only when used.

The tensor codec validates and converts through these adapters, so a `Shape`/`DType`
rule reads the same for every framework: an adapter reports a tensor's shape and dtype
(from the table in `dtypes`) without copying it, and converts to and from NumPy, which
is the form every wire encoder works on. Which adapter a value needs is decided from
its class's module name, so nothing here imports a framework to look at a value.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..wire import dtypes
from ..wire.dtypes import DTypeSpec
from .jsonschema import NUMPY_FORMAT, TF_FORMAT, TORCH_FORMAT


def _module_of(value: Any) -> str:
    return type(value).__module__ or ""


class Framework:
    """One tensor library, as the tensor codec sees it."""

    name: ClassVar[str]
    #: JSON Schema `format` of its tensors.
    format: ClassVar[str]
    #: What an error message calls its tensors.
    label: ClassVar[str]

    def owns(self, value: Any) -> bool:
        """Whether `value` is one of this framework's tensors (by class module; no import)."""
        raise NotImplementedError

    def shape(self, value: Any) -> tuple[int, ...]:
        raise NotImplementedError

    def dtype(self, value: Any) -> DTypeSpec | None:
        """The table entry of the tensor's dtype, None when the table has none."""
        raise NotImplementedError

    def dtype_name(self, value: Any) -> str:
        return str(value.dtype)

    def dtype_facts(self, value: Any) -> tuple[DTypeSpec | None, str]:
        """`(dtype(value), dtype_name(value))`: what a declaration is checked against."""
        return self.dtype(value), self.dtype_name(value)

    def to_numpy(self, value: Any) -> np.ndarray:
        """A host NumPy view (or copy where the framework cannot share) of a tensor."""
        raise NotImplementedError

    def from_numpy(self, array: np.ndarray) -> Any:
        """A tensor of this framework from a validated NumPy array (dtype in the table)."""
        raise NotImplementedError

    def supports(self, spec: DTypeSpec) -> bool:
        return True

    def is_device_tensor(self, value: Any) -> bool:
        """Whether `value` lives on an accelerator and needs the batched host transfer."""
        return False

    def concat(self, values: list[Any], dim: int) -> Any:
        """One tensor stacking `values` along `dim` (adaptive batching)."""
        raise NotImplementedError

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        """`value` cut along `dim` into pieces of `sizes` (views where possible)."""
        raise NotImplementedError


class NumpyFramework(Framework):
    name = "numpy"
    format = NUMPY_FORMAT
    label = "a NumPy array"

    def owns(self, value: Any) -> bool:
        return isinstance(value, np.ndarray | np.generic)

    def shape(self, value: Any) -> tuple[int, ...]:
        return value.shape  # an array's or a NumPy scalar's (`()`): a tuple already

    def dtype(self, value: Any) -> DTypeSpec | None:
        return dtypes.from_numpy(value.dtype)

    def dtype_name(self, value: Any) -> str:
        return dtypes.numpy_facts(value.dtype)[1]

    def dtype_facts(self, value: Any) -> tuple[DTypeSpec | None, str]:
        # memoised per dtype: NumPy works a dtype's printed name out in Python, a
        # fifth of what checking a small v2 tensor against its declaration cost
        return dtypes.numpy_facts(value.dtype)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def from_numpy(self, array: np.ndarray) -> Any:
        return array

    def supports(self, spec: DTypeSpec) -> bool:
        return spec is not dtypes.BFLOAT16 or dtypes.bfloat16_available()

    def concat(self, values: list[Any], dim: int) -> Any:
        return np.concatenate([np.asarray(v) for v in values], axis=dim)

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        return np.split(np.asarray(value), np.cumsum(sizes)[:-1], axis=dim)


class TorchFramework(Framework):
    name = "torch"
    format = TORCH_FORMAT
    label = "a torch.Tensor"

    def owns(self, value: Any) -> bool:
        mod = _module_of(value)
        if not (mod == "torch" or mod.startswith("torch.")):
            return False
        import torch

        return isinstance(value, torch.Tensor)

    def shape(self, value: Any) -> tuple[int, ...]:
        return tuple(value.shape)

    def dtype(self, value: Any) -> DTypeSpec | None:
        return dtypes.from_torch(value.dtype)

    def dtype_name(self, value: Any) -> str:
        return str(value.dtype).removeprefix("torch.")

    def to_numpy(self, value: Any) -> np.ndarray:
        # A plain CPU tensor (the usual output) converts in one call; torch refuses the
        # rest (grad, a device, conj/neg bits, bfloat16), which the steps below handle
        # (2.2 -> 0.7 us a tensor; the JSON answer of a batched model pays it per item).
        try:
            return value.numpy()
        except (RuntimeError, TypeError):
            pass
        import torch

        t = value.detach()
        if t.device.type != "cpu":
            t = t.cpu()  # the runtime's batched transfer normally did this already
        t = t.resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(dtypes.bfloat16_type())
        return t.numpy()

    def from_numpy(self, array: np.ndarray) -> Any:
        import torch

        if not array.flags.writeable:
            # Arrays over received bytes are read-only; torch tensors are always
            # writable, so the tensor gets its own buffer (the one copy to the user).
            array = array.copy()
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        if dtypes.from_numpy(array.dtype) is dtypes.BFLOAT16:
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)

    def supports(self, spec: DTypeSpec) -> bool:
        return spec.torch is not None

    def is_device_tensor(self, value: Any) -> bool:
        return self.owns(value) and value.device.type != "cpu"

    def concat(self, values: list[Any], dim: int) -> Any:
        import torch

        return torch.cat(values, dim=dim)

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        import torch

        return list(torch.split(value, sizes, dim=dim))


class TensorflowFramework(Framework):
    name = "tensorflow"
    format = TF_FORMAT
    label = "a tf.Tensor"

    def owns(self, value: Any) -> bool:
        mod = _module_of(value)
        if not mod.startswith("tensorflow."):
            return False
        import tensorflow as tf

        return isinstance(value, tf.Tensor)

    def shape(self, value: Any) -> tuple[int, ...]:
        return tuple(int(d) for d in value.shape)

    def dtype(self, value: Any) -> DTypeSpec | None:
        return dtypes.from_tf(value.dtype)

    def dtype_name(self, value: Any) -> str:
        return value.dtype.name

    def to_numpy(self, value: Any) -> np.ndarray:
        array = value.numpy()
        if value.dtype.name == "string":
            return _utf8_strings(array)
        return np.asarray(array)

    def from_numpy(self, array: np.ndarray) -> Any:
        import tensorflow as tf

        return tf.convert_to_tensor(array)

    def concat(self, values: list[Any], dim: int) -> Any:
        import tensorflow as tf

        return tf.concat(values, axis=dim)

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        import tensorflow as tf

        return list(tf.split(value, sizes, axis=dim))


def _utf8_strings(array: np.ndarray) -> np.ndarray:
    """tf.string elements (bytes) -> a NumPy unicode array; non-UTF-8 is an error."""
    array = np.asarray(array, dtype=object)  # a rank-0 string tensor's numpy() is bytes
    flat = [b.decode("utf-8") if isinstance(b, bytes) else str(b) for b in array.ravel()]
    return np.array(flat, dtype=str).reshape(array.shape)


NUMPY = NumpyFramework()
TORCH = TorchFramework()
TENSORFLOW = TensorflowFramework()
ALL: tuple[Framework, ...] = (NUMPY, TORCH, TENSORFLOW)


def framework_of(value: Any) -> Framework | None:
    """The framework whose tensor `value` is, or None (lists, scalars, other objects)."""
    for fw in ALL:
        if fw.owns(value):
            return fw
    return None
