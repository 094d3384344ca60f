"""Python values -> JSON, the way the server's pydantic models read them back.

One `orjson.dumps` with a `default` hook, so plain data (dicts, lists, numbers, strings,
datetimes, UUIDs, enums, dataclasses, numpy arrays) is written natively, and only the
types orjson does not know reach the hook.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import os
from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import BaseModel

OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, bytes | bytearray | memoryview):
        # The server's models read bytes in JSON as base64 (val_json_bytes="base64").
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, set | frozenset):
        return list(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return dict(value)
    array = _as_array(value)
    if array is not None:
        return array.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _as_array(value: Any) -> Any:
    """numpy arrays orjson refused (non-contiguous, exotic dtypes), torch/tf tensors."""
    import numpy as np

    if isinstance(value, np.ndarray | np.generic):
        return np.asarray(value)
    if hasattr(value, "__array__") or hasattr(value, "numpy"):
        return to_numpy(value)
    return None


def dumps(value: Any) -> bytes:
    """JSON bytes of a Python value (pydantic models dumped in JSON mode, by alias)."""
    return orjson.dumps(value, default=_default, option=OPTIONS)


def jsonable(value: Any) -> Any:
    """The plain JSON data of a value (for google.protobuf.Struct / Value fields)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return orjson.loads(dumps(value))


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def to_numpy(value: Any) -> Any:
    """A numpy array from an array, a torch/tf tensor or nested lists."""
    import numpy as np

    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__ or ""
    if module.startswith("torch"):
        tensor = value.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            try:
                import ml_dtypes

                return tensor.view(dtype=_torch_int16()).numpy().view(ml_dtypes.bfloat16)
            except ImportError:
                tensor = tensor.float()
        return tensor.numpy()
    if module.startswith("tensorflow") and hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def _torch_int16() -> Any:
    import torch

    return torch.int16
