"""One batched device->host transfer per response: grouping, one sync, replacement."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from pydantic import BaseModel, ConfigDict

from tensorwire import IODescriptor
from tensorwire.codecs import codec_for, transfer


@dataclass(frozen=True)
class Device:
    type: str
    index: int = 0


@dataclass(eq=False)
class FakeTensor:
    device: Device
    name: str


@dataclass
class RecordingOps:
    """Stands in for CUDA: records the order of copies and synchronisations."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    def device_of(self, tensor: FakeTensor) -> Device:
        return tensor.device

    def batched(self, device: Device) -> bool:
        return device.type == "cuda"

    def copy_async(self, tensor: FakeTensor) -> str:
        self.calls.append(("async", tensor.name))
        return f"host:{tensor.name}"

    def synchronize(self, device: Device) -> None:
        self.calls.append(("sync", f"{device.type}:{device.index}"))

    def copy_sync(self, tensor: FakeTensor) -> str:
        self.calls.append(("sync-copy", tensor.name))
        return f"host:{tensor.name}"


GPU0, GPU1, MPS = Device("cuda", 0), Device("cuda", 1), Device("mps")


def test_all_copies_of_a_device_are_queued_before_its_one_sync() -> None:
    tensors = [FakeTensor(GPU0, f"t{i}") for i in range(16)]
    ops = RecordingOps()
    host = transfer.to_host(tensors, ops)
    assert ops.calls == [("async", f"t{i}") for i in range(16)] + [("sync", "cuda:0")]
    assert [host[id(x)] for x in tensors] == [f"host:t{i}" for i in range(16)]


def test_groups_per_device_dedupes_and_falls_back_for_other_devices() -> None:
    a, b, c, d = (FakeTensor(GPU0, "a"), FakeTensor(GPU1, "b"), FakeTensor(GPU0, "c"),
                  FakeTensor(MPS, "d"))
    ops = RecordingOps()
    transfer.to_host([a, b, a, c, d, b], ops)
    assert ops.calls == [("async", "a"), ("async", "c"), ("sync", "cuda:0"),
                         ("async", "b"), ("sync", "cuda:1"), ("sync-copy", "d")]


class Out(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    logits: t.Any
    extra: list[t.Any]
    label: str


def test_replacement_walks_models_lists_dicts_and_keeps_the_rest() -> None:
    x, y, z = FakeTensor(GPU0, "x"), FakeTensor(GPU0, "y"), FakeTensor(GPU0, "z")
    value = {"out": Out(logits=x, extra=[y, 3], label="cat"), "pair": (z, "k"), "n": 1}
    result = transfer.outputs_to_host(value, [x, y, z], RecordingOps())
    assert result["out"].logits == "host:x" and result["out"].extra == ["host:y", 3]
    assert result["out"].label == "cat" and result["pair"] == ("host:z", "k")
    assert result["n"] == 1
    assert value["out"].logits is x  # the original output is not mutated


def test_no_tensors_is_a_no_op() -> None:
    value = {"a": 1}
    assert transfer.outputs_to_host(value, []) is value


def test_codecs_report_only_device_tensors_to_the_runtime() -> None:
    codec = codec_for(list[torch.Tensor])
    assert codec.has_tensors
    assert codec.iter_tensors([torch.zeros(1), torch.ones(1)]) == []  # CPU: nothing to move
    assert codec_for(dict[str, np.ndarray]).iter_tensors({"k": np.zeros(1)}) == []


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.gpu
@cuda
def test_cuda_tensors_come_back_pinned_equal_and_on_the_host() -> None:
    gpu = [torch.randn(256, 1024, device="cuda") + i for i in range(16)]
    codec = codec_for(list[torch.Tensor])
    found = codec.iter_tensors(gpu)
    assert len(found) == 16
    host = transfer.outputs_to_host(gpu, found)
    for g, h in zip(gpu, host, strict=True):
        assert h.device.type == "cpu" and h.is_pinned()
        assert torch.equal(g.cpu(), h)


@pytest.mark.gpu
@cuda
def test_cuda_output_of_a_service_is_encoded_after_one_transfer() -> None:
    codec = codec_for(torch.Tensor)
    value = torch.arange(6, device="cuda", dtype=torch.float32).reshape(2, 3)
    host = transfer.outputs_to_host(value, codec.iter_tensors(value))
    assert codec.http.encode(host, None).content == b"[[0.0,1.0,2.0],[3.0,4.0,5.0]]"


class Scores(IODescriptor):
    logits: torch.Tensor
    features: list[torch.Tensor]
    label: str


async def test_runtime_moves_a_response_in_one_transfer_off_the_event_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime path on CPU, with CPU tensors standing in for CUDA ones."""
    import threading

    import tensorwire
    from tensorwire.codecs.frameworks import TorchFramework
    from tensorwire.runtime.service import ServiceRuntime

    @tensorwire.service
    class Model:
        @tensorwire.api
        def run(self) -> Scores:
            return Scores(logits=torch.zeros(2), features=[torch.ones(3), torch.ones(1)],
                          label="x")

    calls: list[tuple[str, str]] = []

    class FakeCuda(transfer.TorchOps):
        def device_of(self, tensor: t.Any) -> Device:
            return GPU0

        def batched(self, device: t.Any) -> bool:
            return True

        def copy_async(self, tensor: t.Any) -> t.Any:
            calls.append(("copy", threading.current_thread().name))
            return tensor.clone()

        def synchronize(self, device: t.Any) -> None:
            calls.append(("sync", threading.current_thread().name))

    monkeypatch.setattr(TorchFramework, "is_device_tensor",
                        lambda self, value: isinstance(value, torch.Tensor))
    monkeypatch.setattr(transfer, "TorchOps", FakeCuda)
    spec = tensorwire.get_service_spec(Model)
    runtime = ServiceRuntime(spec)
    try:
        value = Model().run()
        host = await runtime.to_host(spec.apis["run"], value)
    finally:
        await runtime.close()
    assert [c[0] for c in calls] == ["copy", "copy", "copy", "sync"]
    assert all(name.startswith("tensorwire-api") for _, name in calls)
    assert host.logits is not value.logits and torch.equal(host.logits, value.logits)
    assert host.features[0] is not value.features[0] and host.label == "x"
