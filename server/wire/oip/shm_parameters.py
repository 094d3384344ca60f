"""The tensor parameters of Triton's shared-memory extensions, read and checked.

An input or requested output whose data lives in a shared-memory region the client
registered names it with three parameters (`docs/protocol/extension_shared_memory.md`):
`shared_memory_region` (a string), `shared_memory_byte_size` and, optionally,
`shared_memory_offset` (non-negative integers; int64 over gRPC). This module reads them
from a tensor's parameter dict, whichever wire it came on (HTTP JSON, or gRPC's
`InferParameter` map made plain by `params_from_proto`), with Triton's rules, and says
what an input's size must be for its shape. It maps nothing: the regions themselves are
the server's (`tensorwire.v2.shm_regions`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .datatypes import BYTES, Datatype, OIPError

SHARED_MEMORY_REGION: Final = "shared_memory_region"
SHARED_MEMORY_OFFSET: Final = "shared_memory_offset"
SHARED_MEMORY_BYTE_SIZE: Final = "shared_memory_byte_size"
#: The largest offset or size a client may state: gRPC carries them as int64.
_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class SharedRef:
    """Where one tensor's bytes are: `byte_size` bytes at `offset` into region `region`."""

    region: str
    offset: int
    byte_size: int


def _error(input: bool, name: str, msg: str) -> OIPError:
    return OIPError.tensor(name, msg) if input else OIPError.output(name, msg)


def shared_ref(params: Mapping[str, Any], name: str, *, input: bool = True
               ) -> SharedRef | None:
    """The region a tensor's parameters name, or None when they name none.

    Refused (OIPError naming the tensor and the parameter): a region that is not a
    non-empty string; an offset or byte size that is not an integer in [0, 2**63);
    an offset or byte size without a region; a region without a byte size (Triton
    reads a missing one as 0, which no tensor but an empty one fits).
    """
    region = params.get(SHARED_MEMORY_REGION)
    if region is None:
        for key in (SHARED_MEMORY_OFFSET, SHARED_MEMORY_BYTE_SIZE):
            if key in params:
                raise _error(input, name, f"'{key}' can not be specified without the "
                                          f"'{SHARED_MEMORY_REGION}' parameter")
        return None
    if not isinstance(region, str) or not region:
        raise _error(input, name, f"'{SHARED_MEMORY_REGION}' must be a region's name "
                                  f"(a non-empty string), got {region!r}")
    if SHARED_MEMORY_BYTE_SIZE not in params:
        raise _error(input, name, f"'{SHARED_MEMORY_BYTE_SIZE}' must be specified "
                                  f"along with '{SHARED_MEMORY_REGION}'")
    return SharedRef(region, _count(params, SHARED_MEMORY_OFFSET, 0, input, name),
                     _count(params, SHARED_MEMORY_BYTE_SIZE, None, input, name))


def _count(params: Mapping[str, Any], key: str, default: int | None, input: bool,
           name: str) -> int:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX:
        raise _error(input, name, f"'{key}' must be an integer from 0 to 2**63 - 1, "
                                  f"got {value!r}")
    return value


def check_input_size(ref: SharedRef, dt: Datatype, dims: tuple[int, ...], name: str
                     ) -> None:
    """Refuse an input whose `shared_memory_byte_size` is not what its shape of `dt`
    takes (BYTES elements have their own lengths: their reading checks them)."""
    if dt is BYTES:
        return
    expected = math.prod(dims) * dt.itemsize
    if ref.byte_size != expected:
        raise OIPError.tensor(name, f"'{SHARED_MEMORY_BYTE_SIZE}' {ref.byte_size} does not "
                                    f"match shape {list(dims)} of {dt.name} "
                                    f"({expected} bytes)")
