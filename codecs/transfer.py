"""Device -> host, once per response: every CUDA tensor of an output in one transfer.

Calling `.cpu()` on each output tensor synchronises the device once per tensor: 16
outputs stall the stream 16 times. Here the tensors of one response (or one batch) are
grouped by device; on a CUDA device each is copied with `non_blocking=True` into its own
pinned host buffer (page-locked memory is what lets the copies run asynchronously),
then the device's current stream is synchronised once. The output is rebuilt with the
host tensors in place of the device ones. Without CUDA there is nothing to move: the
codecs find no device tensors and the runtime never calls in.

The copy backend is a small object (`TorchOps`), so the grouping and replacement logic
is tested on a CPU-only machine with a recording stand-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class CopyOps(Protocol):
    """How tensors are moved; `TorchOps` is the real one."""

    def device_of(self, tensor: Any) -> Any: ...

    def batched(self, device: Any) -> bool:
        """Whether copies from `device` may be queued and synchronised once."""
        ...

    def copy_async(self, tensor: Any) -> Any:
        """Queue a copy into a new pinned host buffer; returns the buffer."""
        ...

    def synchronize(self, device: Any) -> None: ...

    def copy_sync(self, tensor: Any) -> Any:
        """A blocking copy to the host (devices without async copies)."""
        ...


class TorchOps:
    """Pinned buffers, `copy_(non_blocking=True)` and one stream synchronisation."""

    def device_of(self, tensor: Any) -> Any:
        return tensor.device

    def batched(self, device: Any) -> bool:
        return device.type == "cuda"

    def copy_async(self, tensor: Any) -> Any:
        import torch

        src = tensor.detach()
        host = torch.empty(src.shape, dtype=src.dtype, device="cpu", pin_memory=True)
        host.copy_(src, non_blocking=True)
        return host

    def synchronize(self, device: Any) -> None:
        import torch

        torch.cuda.current_stream(device).synchronize()

    def copy_sync(self, tensor: Any) -> Any:
        return tensor.detach().cpu()


def group_by_device(tensors: Sequence[Any], ops: CopyOps) -> dict[Any, list[Any]]:
    """Distinct tensors (by identity) per device, in first-seen order."""
    seen: set[int] = set()
    groups: dict[Any, list[Any]] = {}
    for t in tensors:
        if id(t) in seen:
            continue
        seen.add(id(t))
        groups.setdefault(ops.device_of(t), []).append(t)
    return groups


def to_host(tensors: Sequence[Any], ops: CopyOps | None = None) -> dict[int, Any]:
    """`id(device tensor) -> host tensor` for all of `tensors`, one sync per device."""
    ops = ops or TorchOps()
    host: dict[int, Any] = {}
    for device, group in group_by_device(tensors, ops).items():
        if ops.batched(device):
            for t in group:
                host[id(t)] = ops.copy_async(t)
            ops.synchronize(device)
        else:
            for t in group:
                host[id(t)] = ops.copy_sync(t)
    return host


def replace(value: Any, host: dict[int, Any]) -> Any:
    """`value` with every tensor found in `host` swapped for its host copy.

    Walks what outputs are made of: tensors, lists, tuples, dicts and pydantic models
    (copied with `model_copy`, not re-validated); anything else is returned as is.
    """
    swapped = host.get(id(value))
    if swapped is not None:
        return swapped
    if isinstance(value, list):
        return [replace(v, host) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(replace(v, host) for v in value)
    if isinstance(value, dict):
        return {k: replace(v, host) for k, v in value.items()}
    fields = getattr(type(value), "model_fields", None)
    if fields is not None and hasattr(value, "model_copy"):
        update = {}
        for name in fields:
            old = getattr(value, name, None)
            new = replace(old, host)
            if new is not old:
                update[name] = new
        return value.model_copy(update=update) if update else value
    return value


def outputs_to_host(value: Any, tensors: Sequence[Any], ops: CopyOps | None = None) -> Any:
    """The output `value` with its device `tensors` (from `codec.iter_tensors`) on the host.

    Blocks until the copies are done: the runtime calls it in its thread pool, never on
    the event loop.
    """
    if not tensors:
        return value
    return replace(value, to_host(tensors, ops))
