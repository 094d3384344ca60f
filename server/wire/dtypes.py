"""The one dtype table: NumPy, torch, TensorFlow and `tensorwire.v1.DType` side by side.

Every tensor codec asks this table and nothing else which element types exist, how wide
they are and what each framework calls them, so a dtype accepted on one wire or by one
framework is accepted on every other. The wire is little-endian always.

`bfloat16` has no NumPy dtype of its own: NumPy arrays of it use `ml_dtypes.bfloat16`
(installed with TensorFlow, or on its own), imported only when a bfloat16 tensor is
actually met. `string` tensors are NumPy unicode (`<U`) arrays, `tf.string` tensors,
and have no torch form.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..v1 import DType

Kind = Literal["bool", "uint", "int", "float", "complex", "string"]


@dataclass(frozen=True)
class DTypeSpec:
    """One element type, under every name it has."""

    #: The NumPy name, also the name in `DType("...")` and in JSON Schema.
    name: str
    kind: Kind
    #: Bytes per element on the wire (0 for strings, which travel as `strings`).
    itemsize: int
    #: `torch.<attr>`; None where torch has no such type.
    torch: str | None
    #: `tf.<attr>`.
    tf: str

    @property
    def proto(self) -> int:
        """The `tensorwire.v1.DType` number (read from the descriptor: one source)."""
        return _proto_numbers()[self.name]

    @property
    def is_string(self) -> bool:
        return self.kind == "string"

    @property
    def json_type(self) -> str:
        """The JSON Schema type of one element ("number" for each half of a complex)."""
        return {"bool": "boolean", "uint": "integer", "int": "integer",
                "float": "number", "complex": "number", "string": "string"}[self.kind]

    def numpy(self) -> np.dtype[Any]:
        """The little-endian NumPy dtype of this element type (bfloat16 via ml_dtypes)."""
        return _numpy_dtype(self.name)

    def __str__(self) -> str:
        return self.name


TABLE: tuple[DTypeSpec, ...] = (
    DTypeSpec("bool", "bool", 1, "bool", "bool"),
    DTypeSpec("uint8", "uint", 1, "uint8", "uint8"),
    DTypeSpec("uint16", "uint", 2, "uint16", "uint16"),
    DTypeSpec("uint32", "uint", 4, "uint32", "uint32"),
    DTypeSpec("uint64", "uint", 8, "uint64", "uint64"),
    DTypeSpec("int8", "int", 1, "int8", "int8"),
    DTypeSpec("int16", "int", 2, "int16", "int16"),
    DTypeSpec("int32", "int", 4, "int32", "int32"),
    DTypeSpec("int64", "int", 8, "int64", "int64"),
    DTypeSpec("float16", "float", 2, "float16", "float16"),
    DTypeSpec("bfloat16", "float", 2, "bfloat16", "bfloat16"),
    DTypeSpec("float32", "float", 4, "float32", "float32"),
    DTypeSpec("float64", "float", 8, "float64", "float64"),
    DTypeSpec("complex64", "complex", 8, "complex64", "complex64"),
    DTypeSpec("complex128", "complex", 16, "complex128", "complex128"),
    DTypeSpec("string", "string", 0, None, "string"),
)

BY_NAME: dict[str, DTypeSpec] = {d.name: d for d in TABLE}
STRING = BY_NAME["string"]
BFLOAT16 = BY_NAME["bfloat16"]

_ALIASES = {"str": "string", "unicode": "string", "bf16": "bfloat16"}


@functools.cache
def _proto_numbers() -> dict[str, int]:
    return {v.name.lower(): v.number for v in DType.values if v.number}


@functools.cache
def by_proto() -> dict[int, DTypeSpec]:
    """`tensorwire.v1.DType` number -> spec (0, DTYPE_UNSPECIFIED, is absent)."""
    return {d.proto: d for d in TABLE}


def resolve(name: str) -> DTypeSpec:
    """The spec for a user-given dtype name (`float32`, `f4`, `float`, `str`, ...).

    Raises ValueError naming the known types when there is none.
    """
    text = str(name).strip()
    key = _ALIASES.get(text.lower(), text.lower())
    if key in BY_NAME:
        return BY_NAME[key]
    try:  # NumPy's own names and codes ("f4", "double", "U"); codes are case-sensitive
        spec = from_numpy(np.dtype(text)) if text else None
    except TypeError:
        spec = None
    if spec is None:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(BY_NAME)}")
    return spec


def from_numpy(dtype: np.dtype[Any]) -> DTypeSpec | None:
    """The spec of a NumPy dtype; None for object, structured, bytes, datetime, ...

    ml_dtypes' bfloat16 is recognised by name, so this never imports ml_dtypes.
    """
    return numpy_facts(dtype)[0]


def _spec_of_numpy(dtype: np.dtype[Any]) -> DTypeSpec | None:
    if dtype.kind == "U":
        return STRING
    if dtype.kind == "V" and dtype.name == "bfloat16" and dtype.fields is None:
        return BFLOAT16
    if dtype.kind not in "biufc" or dtype.fields is not None or dtype.subdtype is not None:
        return None
    return BY_NAME.get(np.dtype(dtype.type).name)


#: (spec, printed name) of the NumPy dtypes seen so far: both take numpy a few µs to
#: work out (dtype names are computed in Python), and the same few dtypes recur on every
#: request. Bounded, since a client chooses the dtypes of its .npy bodies.
_FACTS: dict[np.dtype[Any], tuple[DTypeSpec | None, str]] = {}
_FACTS_MAX = 256


def numpy_facts(dtype: np.dtype[Any]) -> tuple[DTypeSpec | None, str]:
    """`(from_numpy(dtype), str(dtype))`, memoised."""
    facts = _FACTS.get(dtype)
    if facts is None:
        facts = (_spec_of_numpy(dtype), str(dtype))
        if len(_FACTS) < _FACTS_MAX:
            _FACTS[dtype] = facts
    return facts


@functools.cache
def _numpy_dtype(name: str) -> np.dtype[Any]:
    if name == "bfloat16":
        return np.dtype(bfloat16_type())
    if name == "string":
        return np.dtype("<U")
    return np.dtype(name).newbyteorder("<")


def bfloat16_type() -> Any:
    """`ml_dtypes.bfloat16`, imported on first use."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes ships with tensorflow and jax
        raise TypeError("bfloat16 NumPy arrays need the `ml_dtypes` package "
                        "(pip install ml_dtypes)") from None
    return ml_dtypes.bfloat16


def bfloat16_available() -> bool:
    """Whether NumPy bfloat16 arrays can be made here (checked without importing)."""
    return importlib.util.find_spec("ml_dtypes") is not None


def from_torch(dtype: Any) -> DTypeSpec | None:
    """The spec of a `torch.dtype` (`torch.float32` -> float32); None if not in the table."""
    name = str(dtype).removeprefix("torch.")
    spec = BY_NAME.get(name)
    return spec if spec is not None and spec.torch == name else None


def torch_dtype(spec: DTypeSpec) -> Any:
    import torch

    if spec.torch is None:
        raise TypeError(f"torch has no {spec.name} tensors")
    return getattr(torch, spec.torch)


def from_tf(dtype: Any) -> DTypeSpec | None:
    """The spec of a `tf.DType` (by its name, so no TensorFlow import here)."""
    return BY_NAME.get(getattr(dtype, "name", str(dtype)))


def tf_dtype(spec: DTypeSpec) -> Any:
    import tensorflow as tf

    return getattr(tf, spec.tf)
