"""The tensorwire side of bench/open_inference.py: one float32 echo API.

`tensorwire serve bench.support.oip_service:OipBench` serves it natively (`POST /echo`, rpc
`oip_bench.OipBench/Echo`) and as the v2 model `echo` (input `x`, output `result`), the
same model MLServer serves in the benchmark.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

import tensorwire
from tensorwire.validators import DType

F32 = Annotated[np.ndarray, DType("float32")]


@tensorwire.service(name="OipBench", proto_package="oip_bench")
class OipBench:
    @tensorwire.api
    async def echo(self, x: F32, /) -> F32:
        """Any float32 tensor back as it came: the cost is the serving stack's."""
        return x
