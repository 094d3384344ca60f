"""Annotation markers that constrain ML data: `Annotated[np.ndarray, Shape((-1, 4))]`.

They are plain, frozen values: the codec that owns the annotated type reads them and
applies them identically to every wire form (JSON, npy, protobuf) and every framework.
A marker on a type whose codec does not understand it is a definition-time TypeError.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Shape:
    """The tensor's shape; `-1` matches any size in that dimension; rank must match."""

    dims: tuple[int, ...]

    def __init__(self, dims: Sequence[int]) -> None:
        dims = tuple(int(d) for d in dims)
        if any(d < -1 for d in dims):
            raise ValueError(f"Shape dims must be >= -1 (-1 is the wildcard), got {dims}")
        object.__setattr__(self, "dims", dims)

    def matches(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.dims) and all(
            want in (-1, got) for want, got in zip(self.dims, shape, strict=True)
        )

    def __str__(self) -> str:
        return "(" + ", ".join("*" if d == -1 else str(d) for d in self.dims) + ")"


@dataclass(frozen=True)
class DType:
    """The element type, by NumPy name (`float32`, `int64`, `bool`, `bfloat16`, ...)."""

    name: str


@dataclass(frozen=True)
class ContentType:
    """Accepted media type(s) of a file/image, fnmatch patterns such as `image/*`."""

    pattern: str

    def matches(self, media_type: str | None) -> bool:
        if not media_type:
            return False
        base = media_type.split(";", 1)[0].strip().lower()
        return any(
            fnmatch.fnmatchcase(base, p.strip().lower()) for p in self.pattern.split(",")
        )


@dataclass(frozen=True)
class DataframeSchema:
    """How a DataFrame travels as JSON (`records` or `columns`) and its required columns."""

    orient: Literal["records", "columns"] = "records"
    columns: tuple[str, ...] | None = None
    dtypes: dict[str, str] | None = field(default=None, hash=False)

    def __init__(
        self,
        orient: Literal["records", "columns"] = "records",
        columns: Sequence[str] | None = None,
        dtypes: dict[str, str] | None = None,
    ) -> None:
        if orient not in ("records", "columns"):
            raise ValueError(
                f"DataframeSchema orient must be 'records' or 'columns', not {orient!r}")
        object.__setattr__(self, "orient", orient)
        object.__setattr__(self, "columns", tuple(columns) if columns is not None else None)
        object.__setattr__(self, "dtypes", dict(dtypes) if dtypes else None)


@dataclass(frozen=True)
class FieldNumber:
    """Pins the protobuf field number of a parameter or model field.

    Numbers otherwise follow declaration order, so inserting a parameter renumbers the
    ones after it; pin the fields of a published contract to keep old clients working.
    """

    number: int

    def __post_init__(self) -> None:
        if not (1 <= self.number <= 536_870_911) or 19_000 <= self.number <= 19_999:
            raise ValueError(f"invalid protobuf field number {self.number}")


__all__ = ["ContentType", "DType", "DataframeSchema", "FieldNumber", "Shape"]
