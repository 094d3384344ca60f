"""Shared by the `tensorwire.wire.oip` tests: the datatype lists, a deterministic sample
array per datatype, and an exact comparison of arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tensorwire.wire import oip

NUMERIC = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
           "FP16", "BF16", "FP32", "FP64"]
ALL = [*NUMERIC, "BYTES"]
TYPED = [d for d in ALL if d not in ("FP16", "BF16")]


@dataclass(frozen=True)
class RawSpec:
    """A raw body's one input (`oip.RawInput`), as a model's metadata would give it."""

    name: str
    datatype: str
    shape: tuple[int, ...] | None = None


def sample(datatype: str, shape: tuple[int, ...] = (2, 3), seed: int = 0) -> np.ndarray:
    """A deterministic array of `datatype` with the extremes of its range in it."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if datatype == "BYTES":
        items = [b"", b"a\x00b", "caf\u00e9".encode(), b"\xff\xfe", b"x" * 300, b"z"]
        out = np.empty(n, dtype=object)
        out[:] = [items[i % len(items)] for i in range(n)]
        return out.reshape(shape)
    if datatype == "BOOL":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    dtype = oip.DATATYPES[datatype].numpy_dtype()
    if oip.DATATYPES[datatype].kind in ("int", "uint"):
        info = np.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        values.flat[0], values.flat[-1] = info.min, info.max
        return values.reshape(shape)
    return (rng.standard_normal(n) * 100).astype(dtype).reshape(shape)


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    if want.dtype == object:
        assert got.dtype == object
        assert got.tolist() == want.tolist()
    else:
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()
