"""Triton's system shared-memory extension with tritonclient, over HTTP and gRPC: Triton's
own `simple_{http,grpc}_shm_client.py` and `simple_*_shm_string_client.py` flows as
written (unregister, create and register regions, infer with inputs and outputs in
them, status, unregister), bad offsets and sizes refused before anything is read or
written, and the extension off unless the operator turns it on. A CUDA region needs a
GPU: registering one is refused naming the extension (its flow runs when CUDA is here).
"""

from __future__ import annotations

import os
import typing as t
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
import tritonclient.utils.shared_memory as shm
from tritonclient import utils
from tritonclient.utils import InferenceServerException

import tensorwire
from tensorwire.validators import DType, Shape
from tests.support.servers import serving

Row = t.Annotated[np.ndarray, Shape((1, 16)), DType("int32")]
PROTOCOLS = ("http", "grpc")


@tensorwire.service
class Simple:
    """Triton's `simple` and `simple_string` example models."""

    @tensorwire.api
    def simple(self, INPUT0: Row, INPUT1: Row) -> dict[str, Row]:
        """Two rows of 16 integers in; their sum and difference out."""
        return {"OUTPUT0": INPUT0 + INPUT1, "OUTPUT1": INPUT0 - INPUT1}

    @tensorwire.api
    def simple_string(self, INPUT0: np.ndarray, INPUT1: np.ndarray
                      ) -> dict[str, np.ndarray]:
        """The same over integers written as strings (BYTES)."""
        a, b = INPUT0.astype(np.int64), INPUT1.astype(np.int64)
        return {"OUTPUT0": (a + b).astype(str), "OUTPUT1": (a - b).astype(str)}


@pytest.fixture(scope="module")
def server() -> Iterator[t.Any]:
    with serving(Simple, shared_memory="system") as running:
        yield running


def client(protocol: str, running: t.Any) -> t.Any:
    if protocol == "http":
        return th.InferenceServerClient(f"127.0.0.1:{running.http_port}")
    return tg.InferenceServerClient(f"127.0.0.1:{running.grpc_port}")


def module(protocol: str) -> t.Any:
    return th if protocol == "http" else tg


def key(name: str) -> str:
    """A shm key of this test alone (xdist workers share /dev/shm)."""
    return f"/tw_test_{name}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


def code(exc: InferenceServerException) -> str:
    """The status as HTTP code or gRPC code name, whichever protocol answered."""
    return str(exc.status()).removeprefix("StatusCode.")


def meta(output: t.Any) -> tuple[str, list[int], dict[str, t.Any]]:
    """(datatype, shape, parameters) of an output, from either client's result."""
    if isinstance(output, dict):
        return output["datatype"], output["shape"], output.get("parameters", {})
    params = {k: getattr(v, v.WhichOneof("parameter_choice"))
              for k, v in output.parameters.items()}
    return output.datatype, list(output.shape), params


class Regions:
    """Client regions made through tritonclient's helpers, destroyed at the end."""

    def __init__(self) -> None:
        self.handles: list[t.Any] = []

    def create(self, name: str, shm_key: str, size: int) -> t.Any:
        handle = shm.create_shared_memory_region(name, shm_key, size)
        self.handles.append(handle)
        return handle

    def destroy(self) -> None:
        for handle in self.handles:
            shm.destroy_shared_memory_region(handle)
        self.handles.clear()


@pytest.fixture
def regions() -> Iterator[Regions]:
    made = Regions()
    yield made
    made.destroy()


def mapped(shm_key: str) -> bool:
    """Whether this process (the server runs in a thread of it) maps the object."""
    return f"/dev/shm{shm_key}" in Path("/proc/self/maps").read_text()


# ---------------------------------------------------------------- Triton's examples


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tritons_simple_shm_client(server: t.Any, regions: Regions, protocol: str) -> None:
    """simple_{http,grpc}_shm_client.py: both inputs in one region, both outputs in
    another, at offsets."""
    triton_client, lib = client(protocol, server), module(protocol)
    triton_client.unregister_system_shared_memory()
    triton_client.unregister_cuda_shared_memory()
    input0_data = np.arange(start=0, stop=16, dtype=np.int32)
    input1_data = np.ones(shape=16, dtype=np.int32)
    input_byte_size = output_byte_size = input0_data.size * input0_data.itemsize
    out_key, in_key = key("output_simple"), key("input_simple")
    shm_op_handle = regions.create("output_data", out_key, output_byte_size * 2)
    triton_client.register_system_shared_memory("output_data", out_key,
                                                output_byte_size * 2)
    shm_ip_handle = regions.create("input_data", in_key, input_byte_size * 2)
    shm.set_shared_memory_region(shm_ip_handle, [input0_data])
    shm.set_shared_memory_region(shm_ip_handle, [input1_data], offset=input_byte_size)
    triton_client.register_system_shared_memory("input_data", in_key, input_byte_size * 2)

    inputs = [lib.InferInput("INPUT0", [1, 16], "INT32"),
              lib.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input_data", input_byte_size)
    inputs[1].set_shared_memory("input_data", input_byte_size, offset=input_byte_size)
    outputs = [lib.InferRequestedOutput("OUTPUT0"), lib.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output_data", output_byte_size)
    outputs[1].set_shared_memory("output_data", output_byte_size, offset=output_byte_size)
    results = triton_client.infer(model_name="simple", inputs=inputs, outputs=outputs)

    datatype, shape, params = meta(results.get_output("OUTPUT0"))
    output0_data = shm.get_contents_as_numpy(shm_op_handle,
                                             utils.triton_to_np_dtype(datatype), shape)
    datatype, shape, params1 = meta(results.get_output("OUTPUT1"))
    output1_data = shm.get_contents_as_numpy(shm_op_handle,
                                             utils.triton_to_np_dtype(datatype), shape,
                                             offset=output_byte_size)
    assert (output0_data[0] == input0_data + input1_data).all()
    assert (output1_data[0] == input0_data - input1_data).all()
    # answered without data, its parameters naming where it went
    assert params == {"shared_memory_region": "output_data", "shared_memory_offset": 0,
                      "shared_memory_byte_size": 64}
    assert params1["shared_memory_offset"] == 64
    if protocol == "grpc":
        assert results.get_response().raw_output_contents == [b"", b""]

    status = triton_client.get_system_shared_memory_status()
    expected = {"output_data": {"name": "output_data", "key": out_key, "offset": 0,
                                "byte_size": 128},
                "input_data": {"name": "input_data", "key": in_key, "offset": 0,
                               "byte_size": 128}}
    if protocol == "http":
        assert {s["name"]: s for s in status} == expected
    else:
        assert {n: {"name": r.name, "key": r.key, "offset": r.offset,
                    "byte_size": r.byte_size} for n, r in status.regions.items()} == expected
    triton_client.unregister_system_shared_memory()
    assert len(shm.mapped_shared_memory_regions()) == 2
    regions.destroy()
    assert len(shm.mapped_shared_memory_regions()) == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tritons_simple_shm_string_client(server: t.Any, regions: Regions,
                                          protocol: str) -> None:
    """simple_{http,grpc}_shm_string_client.py: BYTES tensors, one region each."""
    triton_client, lib = client(protocol, server), module(protocol)
    triton_client.unregister_system_shared_memory()
    triton_client.unregister_cuda_shared_memory()
    in0 = np.arange(start=0, stop=16, dtype=np.int32)
    input0_data = np.array([str(x).encode("utf-8") for x in in0.flatten()], dtype=object)
    in1 = np.ones(shape=16, dtype=np.int32)
    input1_data = np.array([str(x).encode("utf-8") for x in in1.flatten()], dtype=object)
    expected_sum = np.array([str(x).encode("utf-8") for x in np.add(in0, in1)], dtype=object)
    expected_diff = np.array([str(x).encode("utf-8") for x in np.subtract(in0, in1)],
                             dtype=object)
    sizes = [utils.serialized_byte_size(utils.serialize_byte_tensor(a))
             for a in (input0_data, input1_data, expected_sum, expected_diff)]
    names = ["input0_data", "input1_data", "output0_data", "output1_data"]
    handles = {}
    for name, size in zip(names, sizes, strict=True):
        shm_key = key(name)
        handles[name] = regions.create(name, shm_key, size)
        triton_client.register_system_shared_memory(name, shm_key, size)
    shm.set_shared_memory_region(handles["input0_data"],
                                 [utils.serialize_byte_tensor(input0_data)])
    shm.set_shared_memory_region(handles["input1_data"],
                                 [utils.serialize_byte_tensor(input1_data)])
    inputs = [lib.InferInput("INPUT0", [1, 16], "BYTES"),
              lib.InferInput("INPUT1", [1, 16], "BYTES")]
    inputs[0].set_shared_memory("input0_data", sizes[0])
    inputs[1].set_shared_memory("input1_data", sizes[1])
    outputs = [lib.InferRequestedOutput("OUTPUT0"), lib.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output0_data", sizes[2])
    outputs[1].set_shared_memory("output1_data", sizes[3])
    results = triton_client.infer(model_name="simple_string", inputs=inputs,
                                  outputs=outputs)
    for output, handle, expected in (("OUTPUT0", "output0_data", expected_sum),
                                     ("OUTPUT1", "output1_data", expected_diff)):
        datatype, shape, _ = meta(results.get_output(output))
        got = shm.get_contents_as_numpy(handles[handle], utils.triton_to_np_dtype(datatype),
                                        shape)
        assert datatype == "BYTES" and got[0].tolist() == expected.tolist()
    triton_client.unregister_system_shared_memory()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_regions_beside_tensors_in_the_request(server: t.Any, regions: Regions,
                                               protocol: str) -> None:
    """One input in a region, one in the request; one output in a region, one in the
    answer (Triton's test_mixed_raw_shm)."""
    triton_client, lib = client(protocol, server), module(protocol)
    in_key, out_key = key("in"), key("out")
    handle = regions.create("mixed_in", in_key, 64)
    shm.set_shared_memory_region(handle, [np.arange(16, dtype=np.int32)])
    out = regions.create("mixed_out", out_key, 64)
    triton_client.register_system_shared_memory("mixed_in", in_key, 64)
    triton_client.register_system_shared_memory("mixed_out", out_key, 64)
    inputs = [lib.InferInput("INPUT0", [1, 16], "INT32"),
              lib.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(np.full((1, 16), 10, np.int32))
    inputs[1].set_shared_memory("mixed_in", 64)
    outputs = [lib.InferRequestedOutput("OUTPUT0"), lib.InferRequestedOutput("OUTPUT1")]
    outputs[1].set_shared_memory("mixed_out", 64)
    results = triton_client.infer("simple", inputs, outputs=outputs)
    assert results.as_numpy("OUTPUT0").tolist() == [list(range(10, 26))]
    assert shm.get_contents_as_numpy(out, np.int32, [1, 16]).tolist() == [
        list(range(10, -6, -1))]
    triton_client.unregister_system_shared_memory("mixed_in")
    triton_client.unregister_system_shared_memory("mixed_out")


# ---------------------------------------------------------------- refusals


def simple_call(lib: t.Any, region: str, nbytes: int = 64, offset: int = 0,
                out: tuple[str, int, int] | None = None) -> tuple[list, list]:
    inputs = [lib.InferInput("INPUT0", [1, 16], "INT32"),
              lib.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory(region, nbytes, offset=offset)
    inputs[1].set_data_from_numpy(np.ones((1, 16), np.int32))
    outputs = [lib.InferRequestedOutput("OUTPUT0")]
    if out is not None:
        outputs[0].set_shared_memory(*out)
    return inputs, outputs


def run(triton_client: t.Any, call: tuple[list, list]) -> t.Any:
    inputs, outputs = call
    return triton_client.infer("simple", inputs, outputs=outputs)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bad_offsets_and_sizes_are_refused(server: t.Any, regions: Regions,
                                           protocol: str) -> None:
    triton_client, lib = client(protocol, server), module(protocol)
    bad = "400" if protocol == "http" else "INVALID_ARGUMENT"
    in_key, out_key = key("bounds_in"), key("bounds_out")
    regions.create("bounds_in", in_key, 64)
    out = regions.create("bounds_out", out_key, 64)
    shm.set_shared_memory_region(out, [np.full(16, -1, np.int32)])
    triton_client.register_system_shared_memory("bounds_in", in_key, 64)
    triton_client.register_system_shared_memory("bounds_out", out_key, 32)  # half of it
    cases = [
        (simple_call(lib, "bounds_in", offset=64),
         "input 'INPUT0': Invalid offset for shared memory region: 'bounds_in': "
         "'shared_memory_offset' 64 is not within its 64 bytes"),
        (simple_call(lib, "bounds_in", offset=4),
         "input 'INPUT0': Invalid offset + byte size for shared memory region: 'bounds_in'"),
        (simple_call(lib, "bounds_in", nbytes=32),
         "input 'INPUT0': 'shared_memory_byte_size' 32 does not match shape [1, 16] of "
         "INT32 (64 bytes)"),
        (simple_call(lib, "bounds_in", out=("bounds_out", 64)),
         "output 'OUTPUT0': Invalid offset + byte size for shared memory region: "
         "'bounds_out'"),
        (simple_call(lib, "bounds_in", out=("bounds_out", 16)),
         "output 'OUTPUT0': 'shared_memory_byte_size' 16 is too small: the output has 64 "
         "bytes"),
    ]
    for (inputs, outputs), says in cases:
        with pytest.raises(InferenceServerException) as caught:
            triton_client.infer("simple", inputs, outputs=outputs)
        assert code(caught.value) == bad, says
        assert says in caught.value.message()
    # nothing was written into the output region by any refused call
    assert shm.get_contents_as_numpy(out, np.int32, [16]).tolist() == [-1] * 16
    with pytest.raises(InferenceServerException) as caught:
        run(triton_client, simple_call(lib, "nowhere"))
    assert code(caught.value) == ("404" if protocol == "http" else "NOT_FOUND")
    assert "Unable to find shared memory region: 'nowhere'" in caught.value.message()
    with pytest.raises(InferenceServerException) as caught:  # past the object's end
        triton_client.register_system_shared_memory("past", in_key, 64, offset=8)
    assert code(caught.value) == bad
    assert "failed to register shared memory region 'past': invalid args" in str(
        caught.value)
    triton_client.unregister_system_shared_memory()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_register_status_and_unregister(server: t.Any, regions: Regions,
                                        protocol: str) -> None:
    triton_client, lib = client(protocol, server), module(protocol)
    one, two = key("one"), key("two")
    regions.create("one", one, 64)
    regions.create("two", two, 64)
    triton_client.register_system_shared_memory("one", one, 64)
    triton_client.register_system_shared_memory("two", two, 32, offset=32)
    with pytest.raises(InferenceServerException) as caught:
        triton_client.register_system_shared_memory("one", two, 64)
    assert code(caught.value) == ("400" if protocol == "http" else "ALREADY_EXISTS")
    assert "shared memory region 'one' already in manager" in str(caught.value)
    status = triton_client.get_system_shared_memory_status("two")
    if protocol == "http":
        assert status == [{"name": "two", "key": two, "offset": 32, "byte_size": 32}]
    else:
        assert status.regions["two"].offset == 32 and list(status.regions) == ["two"]
    triton_client.unregister_system_shared_memory("one")
    triton_client.unregister_system_shared_memory("one")  # again: nothing to do
    with pytest.raises(InferenceServerException) as caught:
        triton_client.get_system_shared_memory_status("one")
    assert code(caught.value) == ("404" if protocol == "http" else "NOT_FOUND")
    assert "Unable to find system shared memory region: 'one'" in str(caught.value)
    with pytest.raises(InferenceServerException) as caught:  # it is gone for inference
        run(triton_client, simple_call(lib, "one"))
    assert "Unable to find shared memory region: 'one'" in str(caught.value)
    triton_client.unregister_system_shared_memory()
    status = triton_client.get_system_shared_memory_status()
    assert (status if protocol == "http" else list(status.regions)) == []


def test_regions_are_unmapped_on_unregister_and_at_shutdown(regions: Regions) -> None:
    """The server runs in a thread of this process: its mappings are in our maps."""
    kept, dropped = key("kept"), key("dropped")
    with serving(Simple, shared_memory="system") as running:
        triton_client = client("grpc", running)
        for name, shm_key in (("kept", kept), ("dropped", dropped)):
            regions.create(name, shm_key, 4096)
            triton_client.register_system_shared_memory(name, shm_key, 4096)
        regions.destroy()  # the client's own mappings gone: what is left is the server's
        assert mapped(kept) and mapped(dropped)
        triton_client.unregister_system_shared_memory("dropped")
        assert mapped(kept) and not mapped(dropped)
    assert not mapped(kept)


# ---------------------------------------------------------------- off by default


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_off_by_default_refused_naming_the_flag(server: t.Any, regions: Regions,
                                                protocol: str) -> None:
    assert "system_shared_memory" in client(protocol, server).get_server_metadata(
        **({} if protocol == "http" else {"as_json": True}))["extensions"]
    shm_key = key("off")
    regions.create("off", shm_key, 64)
    with serving(Simple) as off:
        triton_client, lib = client(protocol, off), module(protocol)
        extensions = triton_client.get_server_metadata(
            **({} if protocol == "http" else {"as_json": True}))["extensions"]
        assert "system_shared_memory" not in extensions
        status = triton_client.get_system_shared_memory_status()
        assert (status if protocol == "http" else list(status.regions)) == []
        unimplemented = "501" if protocol == "http" else "UNIMPLEMENTED"
        for call in (lambda: triton_client.register_system_shared_memory("off", shm_key, 64),
                     lambda: triton_client.unregister_system_shared_memory(),
                     lambda: run(triton_client, simple_call(lib, "off"))):
            with pytest.raises(InferenceServerException) as caught:
                call()
            assert code(caught.value) == unimplemented
            assert "Client shared memory is disabled: start the server with " \
                   "--shared-memory system" in str(caught.value)


# ---------------------------------------------------------------- CUDA


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cuda_regions_are_refused_naming_the_extension(server: t.Any,
                                                       protocol: str) -> None:
    """As a Triton without a GPU: no CUDA regions, nothing to unregister (Triton's
    examples do so first); registering one is UNIMPLEMENTED naming the extension."""
    triton_client = client(protocol, server)
    status = triton_client.get_cuda_shared_memory_status()
    assert (status if protocol == "http" else list(status.regions)) == []
    triton_client.unregister_cuda_shared_memory()
    with pytest.raises(InferenceServerException) as caught:
        triton_client.register_cuda_shared_memory("gpu", b"\0" * 64, 0, 64)
    assert code(caught.value) == ("501" if protocol == "http" else "UNIMPLEMENTED")
    assert "'cuda_shared_memory' extension" in str(caught.value)
    assert "--shared-memory system" in str(caught.value)


def _cuda_device() -> bool:
    try:
        import cuda.bindings.runtime as cudart
    except ImportError:
        return False
    err, count = cudart.cudaGetDeviceCount()
    return err == cudart.cudaError_t.cudaSuccess and count > 0


@pytest.mark.skipif(not _cuda_device(), reason="needs a CUDA device and cuda-python")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_real_cuda_region_is_refused_naming_the_extension(server: t.Any,
                                                            protocol: str) -> None:
    """simple_{http,grpc}_cudashm_client.py up to its register: the handle is real, the
    answer is that tensorwire does not map CUDA memory."""
    import tritonclient.utils.cuda_shared_memory as cudashm

    handle = cudashm.create_shared_memory_region("input_data", 64, 0)
    try:
        triton_client = client(protocol, server)
        triton_client.unregister_cuda_shared_memory()
        with pytest.raises(InferenceServerException) as caught:
            triton_client.register_cuda_shared_memory(
                "input_data", cudashm.get_raw_handle(handle), 0, 64)
        assert "'cuda_shared_memory' extension" in str(caught.value)
    finally:
        cudashm.destroy_shared_memory_region(handle)
