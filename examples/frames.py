"""pandas DataFrames in both JSON orients (and `tensorwire.v1.DataFrame` over gRPC).

    curl -s localhost:3000/ratios -H 'Content-Type: application/json' -d \\
      '{"df": [{"species": "setosa", "length": 5.1, "width": 3.5}]}'
    curl -s localhost:3000/totals -H 'Content-Type: application/json' -d \\
      '{"df": {"item": ["a", "b"], "qty": [2, 3], "price": [1.5, 2.0]}}'
"""

from __future__ import annotations

import typing as t

import pandas as pd

import tensorwire
from tensorwire.validators import DataframeSchema

Flowers = t.Annotated[pd.DataFrame, DataframeSchema(
    orient="records", columns=["species", "length", "width"],
    dtypes={"length": "float64", "width": "float64"})]
Orders = t.Annotated[pd.DataFrame, DataframeSchema(
    orient="columns", columns=["item", "qty", "price"], dtypes={"qty": "int64"})]


@tensorwire.service
class Frames:
    """Tabular data as records or as columns."""

    @tensorwire.api
    def ratios(self, df: Flowers
               ) -> t.Annotated[pd.DataFrame, DataframeSchema(orient="records")]:
        """Add length/width to each record."""
        return df.assign(ratio=df["length"] / df["width"])

    @tensorwire.api
    def totals(self, df: Orders
               ) -> t.Annotated[pd.DataFrame, DataframeSchema(orient="columns")]:
        """Add qty * price to each column set."""
        return df.assign(total=df["qty"] * df["price"])

    @tensorwire.api
    def count(self, df: Orders, /) -> int:
        """Root input: the body is the frame; returns its number of rows."""
        return len(df)
