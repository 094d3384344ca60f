"""Constraint-validated inputs: every rule is part of the contract on both protocols."""

from __future__ import annotations

import typing as t

from annotated_types import Ge, Gt, Lt, MaxLen, MultipleOf
from pydantic import Field

import tensorwire


@tensorwire.service(name="TextGenerator")
class TextGenerator:
    """A text generation endpoint whose inputs are checked before the model runs."""

    @tensorwire.api
    def complete(
        self,
        prompt: t.Annotated[str, MaxLen(1000)] = Field(
            description="Text to continue (at most 1000 characters).",
            examples=["Once upon a time"]),
        temperature: t.Annotated[float, Ge(0), Lt(2)] = Field(
            default=1.0, description="Sampling temperature in [0, 2)."),
        max_tokens: t.Annotated[int, Gt(0), MultipleOf(100)] = Field(
            default=100, description="Token budget: a positive multiple of 100."),
    ) -> dict[str, t.Any]:
        """Echo the accepted settings with a deterministic completion."""
        words = prompt.split()
        return {
            "completion": " ".join(reversed(words)),
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
