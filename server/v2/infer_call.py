"""One `ModelInferRequest` on its way through the gRPC envelope (`ModelInfer`, and each
request of Triton's stream): what the servicer parsed, and what `read` found for
`write` to use."""

from __future__ import annotations

from typing import Any

from .shm_regions import Placement


class InferCall:
    """The message, its raw inputs cut out of it (None: they are in the message), and
    the shared-memory regions its tensors name (`read` sets them; `write` writes the
    outputs there)."""

    __slots__ = ("placed", "raw", "request")

    def __init__(self, request: Any, raw: Any) -> None:
        self.request = request
        self.raw = raw
        self.placed: Placement | None = None
