"""The default service of `make serve`: a few small APIs to try with curl.

    curl -s localhost:3000/summarize -H 'Content-Type: application/json' \\
         -d '{"text": "tensorwire serves one typed contract over gRPC and HTTP", "max_words": 4}'
"""

from __future__ import annotations

import typing as t
from collections.abc import Generator

from annotated_types import Ge, Le
from pydantic import BaseModel, Field

import tensorwire


class Summary(BaseModel):
    summary: str
    words: int


@tensorwire.service
class Quickstart:
    """Text utilities: summarize, count, stream."""

    @tensorwire.api
    def summarize(
        self,
        text: str = Field(description="The text to summarize.",
                          examples=["tensorwire serves one typed contract over gRPC and HTTP"]),
        max_words: t.Annotated[int, Ge(1), Le(100)] = Field(
            default=8, description="How many words to keep."),
    ) -> Summary:
        """Keep the first `max_words` words."""
        words = text.split()
        return Summary(summary=" ".join(words[:max_words]), words=len(words))

    @tensorwire.api
    def upper(self, text: str, /) -> str:
        """Root input: the text/plain body is the value."""
        return text.upper()

    @tensorwire.api
    def count(self, text: str, /, ctx: tensorwire.Context) -> dict[str, int]:
        """Character and word counts; also sets a response header."""
        ctx.response.headers["X-Words"] = str(len(text.split()))
        return {"chars": len(text), "words": len(text.split())}

    @tensorwire.api
    def spell(self, word: str = "tensorwire") -> Generator[str, None, None]:
        """Stream the word letter by letter (server-sent events / gRPC stream)."""
        yield from word
