"""A LanguageModel-style streaming service: tokens are sent as they are produced."""

from __future__ import annotations

import asyncio
import typing as t
from collections.abc import AsyncGenerator, Generator

from annotated_types import Ge, Le

import tensorwire

MAX_TOKENS = 1024


@tensorwire.service
class LanguageModel:
    """Streams a (toy) completion of the prompt, one word at a time."""

    def __init__(self) -> None:
        self.vocabulary = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]

    @tensorwire.api
    def generate(
        self,
        prompt: str = "Explain superconductors in plain English",
        max_tokens: t.Annotated[int, Ge(1), Le(MAX_TOKENS)] = 16,
        delay: t.Annotated[float, Ge(0), Le(1)] = 0.0,
    ) -> Generator[str, None, None]:
        """Yield max_tokens words, each after `delay` seconds (sync generator)."""
        import time

        for i in range(max_tokens):
            if delay:
                time.sleep(delay)
            yield self.vocabulary[(len(prompt) + i) % len(self.vocabulary)] + " "

    @tensorwire.api
    async def agenerate(
        self,
        prompt: str,
        max_tokens: t.Annotated[int, Ge(1), Le(MAX_TOKENS)] = 16,
        delay: t.Annotated[float, Ge(0), Le(1)] = 0.0,
    ) -> AsyncGenerator[str, None]:
        """The same, as an async generator on the event loop."""
        for i in range(max_tokens):
            if delay:
                await asyncio.sleep(delay)
            yield self.vocabulary[(len(prompt) + i) % len(self.vocabulary)] + " "
