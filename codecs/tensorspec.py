"""What a tensor annotation declares, and the rules that follow from it on every wire.

`TensorSpec` (framework, `Shape`, `DType`) checks a tensor's dtype, rank and sizes the
same way whatever it came from; the JSON Schema helpers describe its JSON form (nested
lists of the declared element, non-finite floats as their names) and an example that the
server accepts (zeros of the declared shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..validators import Shape
from ..wire import dtypes
from ..wire.dtypes import DTypeSpec
from ..wire.field_error import FieldError
from .frameworks import Framework


def format_shape(dims: tuple[int, ...]) -> str:
    """`(2, 3)`, `(*, 4)`, `(4,)`, `()`: a tuple as Python writes it, `*` for -1."""
    items = ["*" if d == -1 else str(d) for d in dims]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


@dataclass(frozen=True)
class TensorSpec:
    """What a tensor annotation declares: its framework, and optionally shape and dtype."""

    framework: Framework
    shape: Shape | None = None
    dtype: DTypeSpec | None = None

    def describe(self) -> str:
        parts = [self.framework.label]
        if self.dtype is not None:
            parts.append(f"of {self.dtype.name}")
        if self.shape is not None:
            parts.append(f"with shape {format_shape(self.shape.dims)}")
        return " ".join(parts)

    def check(self, shape: tuple[int, ...], spec: DTypeSpec | None, dtype_name: str) -> None:
        """The one rule for every wire and framework: dtype first, then rank and sizes."""
        if spec is None:
            raise FieldError(f"dtype {dtype_name} is not supported; use one of "
                             f"{', '.join(d.name for d in dtypes.TABLE)}", type="tensor_dtype")
        if self.dtype is not None and spec is not self.dtype:
            raise FieldError(f"expected dtype {self.dtype.name}, got {spec.name}",
                             type="tensor_dtype")
        if not self.framework.supports(spec):
            raise FieldError(f"{self.framework.label} cannot hold {spec.name} elements",
                             type="tensor_dtype")
        want = self.shape
        if want is not None and not want.matches(shape):
            if len(shape) != len(want.dims):
                msg = (f"expected rank {len(want.dims)} (shape {format_shape(want.dims)}), "
                       f"got rank {len(shape)} (shape {format_shape(shape)})")
            else:
                msg = f"expected shape {format_shape(want.dims)}, got {format_shape(shape)}"
            raise FieldError(msg, type="tensor_shape")

    def fit_empty(self, array: np.ndarray) -> np.ndarray:
        """`[]` in JSON has lost its inner dimensions; give back the declared ones."""
        if self.shape is None or array.size or array.ndim >= len(self.shape.dims):
            return array
        dims = self.shape.dims
        if not all(w in (-1, g) for w, g in zip(dims, array.shape, strict=False)):
            return array
        rest = tuple(0 if d == -1 else d for d in dims[array.ndim:])
        return array.reshape(array.shape + rest)


NONFINITE = {"enum": ["NaN", "Infinity", "-Infinity"]}


def example(spec: TensorSpec) -> Any:
    """Zeros of the declared shape (a free size as 1; no Shape: one element) and dtype.

    Without it, Swagger UI made its example from the element schema, whose `anyOf` of a
    number and the non-finite names gave `[[0, "NaN", 0, "NaN"]]`, which the server
    then refused for a float tensor.
    """
    kind = spec.dtype.kind if spec.dtype is not None else "float"
    zero: Any = {"float": 0.0, "complex": [0.0, 0.0], "bool": False}.get(kind, 0)
    if spec.dtype is not None and spec.dtype.json_type == "string":
        zero = ""
    dims = spec.shape.dims if spec.shape is not None else (1,)
    value: Any = zero
    for dim in reversed(dims):
        value = [value] * (1 if dim == -1 else dim)
    return value


def element_schema(spec: DTypeSpec | None) -> dict[str, Any]:
    if spec is None:
        return {}
    if spec.kind == "float":
        return {"anyOf": [{"type": "number"}, NONFINITE]}
    if spec.kind == "complex":
        return {"type": "array", "items": {"anyOf": [{"type": "number"}, NONFINITE]},
                "minItems": 2, "maxItems": 2}
    return {"type": spec.json_type}
