"""pydantic models in and out, and an `input_spec` API whose fields are the top level."""

from __future__ import annotations

import datetime as dt
import enum
import typing as t

from pydantic import BaseModel, Field

import tensorwire


class Sentiment(enum.StrEnum):
    negative = "negative"
    neutral = "neutral"
    positive = "positive"


class Review(BaseModel):
    """A product review."""

    text: str = Field(description="The review text.", min_length=1)
    stars: int = Field(ge=1, le=5, description="1 to 5 stars.")
    tags: list[str] = Field(default_factory=list)
    posted: dt.datetime | None = None


class Analysis(BaseModel):
    """What the service concluded about a review."""

    sentiment: Sentiment
    score: float
    words: int
    tags: dict[str, int] = Field(default_factory=dict)


class Query(tensorwire.IODescriptor):
    """A search query: sent as the top-level JSON object."""

    query: str = Field(min_length=1, max_length=200)
    top_k: int = Field(default=3, ge=1, le=20)
    mode: t.Literal["exact", "fuzzy"] = "fuzzy"


@tensorwire.service
class ReviewAnalyzer:
    """Structured inputs and outputs with pydantic."""

    CATALOG = ["red shoes", "blue shoes", "red hat", "green scarf", "blue hat"]

    @tensorwire.api
    def analyze(self, params: Review) -> Analysis:
        """Score one review (sent as {"params": {...}})."""
        score = (params.stars - 3) / 2
        sentiment = (Sentiment.positive if score > 0 else
                     Sentiment.negative if score < 0 else Sentiment.neutral)
        return Analysis(sentiment=sentiment, score=score, words=len(params.text.split()),
                        tags={t: len(t) for t in params.tags})

    @tensorwire.api(input_spec=Query)
    def search(self, **params: t.Any) -> list[str]:
        """Search the catalog (fields of Query at the top level)."""
        q = params["query"].lower()
        if params["mode"] == "exact":
            hits = [item for item in self.CATALOG if item == q]
        else:
            hits = [item for item in self.CATALOG if any(w in item for w in q.split())]
        return hits[: params["top_k"]]

    @tensorwire.api
    def shout(self, text: str, /) -> str:
        """Root input: the text/plain body is the value."""
        return text.upper()

    @tensorwire.api
    async def stats(self, values: list[float], /) -> dict[str, float]:
        """Root input of a JSON array."""
        if not values:
            raise tensorwire.errors.InvalidArgument.at(["values"], "needs at least one value")
        return {"min": min(values), "max": max(values), "mean": sum(values) / len(values)}

    @tensorwire.api
    def fail(self, message: str = "boom") -> str:
        """Always raises: shows that user errors are 500 without a traceback."""
        raise RuntimeError(f"secret internals: {message}")
