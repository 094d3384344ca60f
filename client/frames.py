"""pandas DataFrames on the client (pandas is imported only when a frame is used).

- HTTP JSON: `format: pandas-dataframe` (or BentoML's `type: dataframe`) with `orient`:
  `records` (a list of row objects) or `columns` (an object of column lists);
- gRPC: `tensorwire.v1.DataFrame` with one 1-D Tensor per column (and an optional index).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgument
from . import jsonkinds, protokinds
from .tensors import fill_tensor, tensor_from_proto


def _is_frame(value: Any) -> bool:
    return any(c.__name__ == "DataFrame" and (c.__module__ or "").startswith("pandas")
               for c in type(value).__mro__)


class FrameKind(jsonkinds.JsonKind):
    trivial = False

    def __init__(self, schema: dict[str, Any]) -> None:
        super().__init__(schema)
        self.orient = schema.get("orient", "records")
        self.columns = schema.get("columns")

    def to_json(self, value: Any) -> Any:
        if not _is_frame(value):
            return value
        return value.to_dict(orient="records" if self.orient == "records" else "list")

    def from_json(self, value: Any) -> Any:
        import pandas as pd

        if value is None:
            return None
        return pd.DataFrame(value, columns=self.columns)

    def summary(self) -> str:
        return "DataFrame"  # the orient is HTTP's business: gRPC has one frame form


def is_frame_schema(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "dataframe" or schema.get("format") == "pandas-dataframe"


class FrameElement(protokinds.Message):
    """`tensorwire.v1.DataFrame {columns, data: repeated Tensor, index}`."""

    def fill(self, value: Any, msg: Any, loc: Any, files: Any) -> None:
        import pandas as pd

        if not _is_frame(value):
            try:
                value = pd.DataFrame(value)
            except (TypeError, ValueError) as exc:
                raise InvalidArgument.at(list(loc), f"cannot make a DataFrame: {exc}",
                                         "dataframe_type") from None
        msg.SetInParent()
        for name in value.columns:
            msg.columns.append(str(name))
            fill_tensor(value[name].to_numpy(), msg.data.add(), (*loc, str(name)))
        if not isinstance(value.index, pd.RangeIndex) or value.index.start != 0 \
                or value.index.step != 1:
            fill_tensor(value.index.to_numpy(), msg.index, (*loc, "index"))

    def decode(self, raw: Any, files: Any) -> Any:
        import pandas as pd

        data = {name: tensor_from_proto(t) for name, t in zip(raw.columns, raw.data,
                                                              strict=False)}
        index = tensor_from_proto(raw.index) if raw.HasField("index") else None
        return pd.DataFrame(data, index=index, columns=list(raw.columns))

    def summary(self) -> str:
        return "DataFrame"

