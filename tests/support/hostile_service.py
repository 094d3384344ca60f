"""A service for the reliability suite (tests/e2e/reliability): plain inputs to aim
hostile requests at, floats with and without the non-finite opt-in, and outputs that
hold NaN or infinity on demand. Importable by the CLI as
`tests.support.hostile_service:Hostile`."""

from __future__ import annotations

import math
import typing as t
from collections.abc import Generator

import numpy as np
from pydantic import AllowInfNan, BaseModel, ConfigDict, Field

import tensorwire
from tensorwire.validators import DType

#: What `kind` names in the APIs that produce a number.
VALUES = {"finite": 1.5, "nan": math.nan, "inf": math.inf, "-inf": -math.inf}
Kind = t.Literal["finite", "nan", "inf", "-inf"]
LooseFloat = t.Annotated[float, AllowInfNan()]


class Reading(BaseModel):
    value: float
    note: str = ""


class LenientReading(BaseModel):
    """A model that opts all its floats in (pydantic's own model config), and writes
    them in JSON as "NaN" / "Infinity" (pydantic's default would write null)."""

    model_config = ConfigDict(allow_inf_nan=True, ser_json_inf_nan="strings")
    value: float
    history: list[float] = []


class Mixed(BaseModel):
    """One float opted in, one not."""

    model_config = ConfigDict(ser_json_inf_nan="strings")
    strict: float
    loose: float = Field(0.0, allow_inf_nan=True)


class Silent(BaseModel):
    """Opts a float in but keeps pydantic's JSON default (NaN written as null)."""

    loose: float = Field(0.0, allow_inf_nan=True)


@tensorwire.service
class Hostile:
    @tensorwire.api
    def echo(self, text: str) -> str:
        return text

    @tensorwire.api
    def upper(self, text: str, /) -> str:
        """A root input: the (possibly compressed) body is the text."""
        return text.upper()

    @tensorwire.api
    def size(self, data: bytes, /) -> int:
        """A root bytes input: how many bytes arrived, once inflated."""
        return len(data)

    @tensorwire.api
    def count(self, text: str, repeat: int = 1) -> int:
        return len(text) * repeat

    # ------------------------------------------------------------ inputs
    @tensorwire.api
    def scale(self, x: float, factor: float = 1.0) -> float:
        return x * factor

    @tensorwire.api
    def loose(self, x: LooseFloat) -> LooseFloat:
        """Opts in with `Annotated[float, AllowInfNan()]`, in and out."""
        return x

    @tensorwire.api
    def loose_field(self, x: float = Field(allow_inf_nan=True)) -> LooseFloat:
        """Opts in with `Field(allow_inf_nan=True)`."""
        return x

    @tensorwire.api
    def total(self, xs: list[float]) -> float:
        return math.fsum(xs)

    @tensorwire.api
    def table(self, d: dict[str, float]) -> dict[str, float]:
        return d

    @tensorwire.api
    def anything(self, v: t.Any) -> t.Any:
        return v

    @tensorwire.api
    def struct(self, d: dict) -> dict:
        return d

    @tensorwire.api
    def reading(self, r: Reading) -> Reading:
        return r

    @tensorwire.api
    def lenient(self, r: LenientReading) -> LenientReading:
        return r

    @tensorwire.api
    def mixed(self, m: Mixed) -> Mixed:
        return m

    @tensorwire.api(input_spec=Reading)
    def spec(self, **params: t.Any) -> str:
        """The input is the model's fields at the top level (the user's model)."""
        return repr(params["value"])

    @tensorwire.api
    def half(self, x: float, /) -> float:
        """A root float: the body is the number."""
        return x / 2

    @tensorwire.api
    def vector(self, x: t.Annotated[np.ndarray, DType("float64")]) -> np.ndarray:
        """Tensors keep their documented non-finite form ("NaN", "Infinity")."""
        return x

    # ------------------------------------------------------------ outputs
    @tensorwire.api
    def make(self, kind: Kind) -> float:
        return VALUES[kind]

    @tensorwire.api
    def make_loose(self, kind: Kind) -> LooseFloat:
        return VALUES[kind]

    @tensorwire.api
    def make_list(self, kind: Kind) -> list[float]:
        return [1.0, VALUES[kind]]

    @tensorwire.api
    def make_any(self, kind: Kind) -> t.Any:
        return {"values": [1.0, VALUES[kind]]}

    @tensorwire.api
    def make_reading(self, kind: Kind) -> Reading:
        return Reading(value=VALUES[kind])

    @tensorwire.api
    def make_mixed(self, kind: Kind) -> Mixed:
        return Mixed(strict=1.0, loose=VALUES[kind])

    @tensorwire.api
    def make_lenient(self, kind: Kind) -> LenientReading:
        return LenientReading(value=VALUES[kind], history=[0.5, VALUES[kind]])

    @tensorwire.api
    def make_silent(self, kind: Kind) -> Silent:
        return Silent(loose=VALUES[kind])

    @tensorwire.api
    def make_tensor(self, kind: Kind) -> np.ndarray:
        return np.array([1.0, VALUES[kind]], dtype=np.float32)

    @tensorwire.api
    def make_stream(self, kind: Kind) -> Generator[float, None, None]:
        yield 1.0
        yield VALUES[kind]
