"""`tensorwire.v2.shm_regions.SystemSharedMemory`, called directly over a private
directory standing for /dev/shm: keys that would leave it, regions checked against
their object, tensors checked against their region before any read or write, inputs as
read-only views of the client's memory, outputs written once they all fit, and regions
unmapped on unregister, after the last view of a request in flight, and at close."""

from __future__ import annotations

import gc
import mmap
import os
from pathlib import Path

import numpy as np
import pytest

from tensorwire.codecs.v2_facet import Tensor
from tensorwire.errors import InvalidArgument, NotFound, Unimplemented
from tensorwire.v2.shm_regions import AlreadyExists, SystemSharedMemory


@pytest.fixture
def shm_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def shared(shm_dir: Path) -> SystemSharedMemory:
    return SystemSharedMemory(True, directory=str(shm_dir))


def obj(shm_dir: Path, name: str, size: int) -> Path:
    path = shm_dir / name
    path.write_bytes(bytes(size))
    return path


def client_view(path: Path) -> mmap.mmap:
    """The client's own mapping of the object (what tritonclient writes through)."""
    with open(path, "r+b") as f:
        return mmap.mmap(f.fileno(), 0)


def x_in(region: str, nbytes: int, offset: int = 0, shape: list[int] | None = None,
         datatype: str = "INT32", data: bool = False) -> tuple:
    params = {"shared_memory_region": region, "shared_memory_byte_size": nbytes}
    if offset:
        params["shared_memory_offset"] = offset
    return ("x", datatype, shape if shape is not None else [nbytes // 4], params, data)


# ---------------------------------------------------------------- register, status


def test_register_status_unregister(shared: SystemSharedMemory, shm_dir: Path) -> None:
    obj(shm_dir, "data", 256)
    shared.register("out", "data", 0, 64)  # leading slashes are shm_open's: optional
    shared.register("in", "/data", 64, 128)
    assert shared.status() == [  # by name, as Triton lists them
        {"name": "in", "key": "/data", "offset": 64, "byte_size": 128},
        {"name": "out", "key": "data", "offset": 0, "byte_size": 64}]
    assert shared.status("out") == [{"name": "out", "key": "data", "offset": 0,
                                     "byte_size": 64}]
    shared.unregister("in")
    shared.unregister("never-registered")  # no error, as Triton
    assert [r["name"] for r in shared.status()] == ["out"]
    shared.unregister()
    assert shared.status() == []
    with pytest.raises(NotFound, match="Unable to find system shared memory region: 'in'"):
        shared.status("in")


def test_a_name_registered_twice_is_already_exists(shared: SystemSharedMemory,
                                                   shm_dir: Path) -> None:
    obj(shm_dir, "data", 8)
    shared.register("r", "/data", 0, 8)
    with pytest.raises(AlreadyExists, match="shared memory region 'r' already in manager"
                       ) as caught:
        shared.register("r", "/data", 0, 8)
    assert caught.value.http_status == 400 and caught.value.grpc_code == "ALREADY_EXISTS"


@pytest.mark.parametrize("key", ["../escape", "a/b", "/x/../../etc/passwd", ".", "..",
                                 "/..", "nul\0byte"])
def test_a_key_never_leaves_the_directory(shared: SystemSharedMemory, shm_dir: Path,
                                          key: str) -> None:
    (shm_dir / "a").mkdir()
    obj(shm_dir / "a", "b", 8)
    obj(shm_dir.parent, "escape", 8)
    with pytest.raises(InvalidArgument, match="invalid shm key"):
        shared.register("r", key, 0, 8)
    assert shared.status() == []


@pytest.mark.parametrize("key", ["/", "///", ""])
def test_a_key_of_slashes_only_is_refused_in_tritons_words(shared: SystemSharedMemory,
                                                           key: str) -> None:
    with pytest.raises(InvalidArgument, match=f"cannot register shared memory region 'r' "
                                              f"- invalid shm key '{key}'$"):
        shared.register("r", key, 0, 8)


def test_a_symbolic_link_is_never_followed(shared: SystemSharedMemory, shm_dir: Path,
                                           tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret"
    outside.write_bytes(b"s" * 64)
    (shm_dir / "link").symlink_to(outside)
    with pytest.raises(InvalidArgument, match=r"Unable to open shared memory region: "
                                              r"'/link' \(it is a symbolic link\)"):
        shared.register("r", "/link", 0, 8)


def test_only_regular_objects_are_mapped(shared: SystemSharedMemory, shm_dir: Path) -> None:
    os.mkfifo(shm_dir / "fifo")
    with pytest.raises(InvalidArgument, match="'/fifo' is not a shared memory object"):
        shared.register("r", "/fifo", 0, 8)
    (shm_dir / "dir").mkdir()
    with pytest.raises(InvalidArgument, match="Unable to open shared memory region: '/dir'"):
        shared.register("r", "/dir", 0, 8)
    with pytest.raises(InvalidArgument, match="Unable to open shared memory region: "
                                              "'/missing' \\(No such file or directory\\)"):
        shared.register("r", "/missing", 0, 8)


@pytest.mark.parametrize(("offset", "byte_size"), [(0, 65), (1, 64), (64, 1), (65, 0),
                                                   (2**63, 8)])
def test_a_region_lies_within_its_object(shared: SystemSharedMemory, shm_dir: Path,
                                         offset: int, byte_size: int) -> None:
    obj(shm_dir, "data", 64)
    with pytest.raises(InvalidArgument, match="failed to register shared memory region "
                                              "'r': invalid args"):
        shared.register("r", "/data", offset, byte_size)
    assert shared.status() == []


def test_a_region_at_an_offset_off_the_page_grid(shared: SystemSharedMemory,
                                                 shm_dir: Path) -> None:
    """mmap maps from page boundaries; the region still starts at its own offset."""
    path = obj(shm_dir, "data", mmap.PAGESIZE * 2 + 100)
    with client_view(path) as client:
        client[mmap.PAGESIZE + 4:mmap.PAGESIZE + 20] = np.arange(4, dtype=np.int32).tobytes()
    shared.register("r", "/data", mmap.PAGESIZE + 4, 16)
    placed = shared.place([x_in("r", 16)], [])
    assert placed is not None and placed.inputs["x"].tolist() == [0, 1, 2, 3]


# ---------------------------------------------------------------- requests


def test_inputs_are_read_only_views_of_the_clients_memory(shared: SystemSharedMemory,
                                                          shm_dir: Path) -> None:
    path = obj(shm_dir, "data", 64)
    shared.register("r", "/data", 0, 64)
    with client_view(path) as client:
        client[16:32] = np.array([1, 2, 3, 4], np.int32).tobytes()
        placed = shared.place([x_in("r", 16, offset=16, shape=[2, 2])], [])
        assert placed is not None
        x = placed.inputs["x"]
        assert x.tolist() == [[1, 2], [3, 4]] and not x.flags.writeable
        client[16:20] = np.array([9], np.int32).tobytes()
        assert x[0, 0] == 9  # no copy: the very memory the client wrote
        del x, placed


@pytest.mark.parametrize(("tensor", "says"), [
    (x_in("r", 64, offset=64), "Invalid offset for shared memory region: 'r': "
                               "'shared_memory_offset' 64 is not within its 64 bytes"),
    (x_in("r", 64, offset=4), "Invalid offset + byte size for shared memory region: 'r': "
                              "'shared_memory_offset' 4 + 'shared_memory_byte_size' 64 "
                              "run past its 64 bytes"),
    (x_in("r", 32, shape=[16]), "'shared_memory_byte_size' 32 does not match shape [16] "
                                "of INT32 (64 bytes)"),
    (x_in("r", 16, data=True), "must set only one of 'data' (gRPC: 'contents'), "
                               "'binary_data_size' and 'shared_memory_region'"),
])
def test_input_refusals_name_the_parameter(shared: SystemSharedMemory, shm_dir: Path,
                                           tensor: tuple, says: str) -> None:
    obj(shm_dir, "data", 64)
    shared.register("r", "/data", 0, 64)
    with pytest.raises(InvalidArgument) as caught:
        shared.place([tensor], [])
    assert caught.value.message == f"input 'x': {says}"
    assert caught.value.http_status == 400 and caught.value.grpc_code == "INVALID_ARGUMENT"


def test_an_unknown_region_is_not_found(shared: SystemSharedMemory) -> None:
    with pytest.raises(NotFound, match=r"input 'x': Unable to find shared memory region: "
                                       r"'nowhere'$"):
        shared.place([x_in("nowhere", 8)], [])
    many = SystemSharedMemory(True, workers=4)
    with pytest.raises(NotFound, match="this server runs 4 worker processes"):
        many.place([], [("y", {"shared_memory_region": "r", "shared_memory_byte_size": 4})])


def test_outputs_are_written_once_all_fit(shared: SystemSharedMemory,
                                          shm_dir: Path) -> None:
    path = obj(shm_dir, "out", 64)
    shared.register("o", "/out", 0, 64)
    wanted = [(n, {"shared_memory_region": "o", "shared_memory_byte_size": 16,
                   "shared_memory_offset": off}) for n, off in (("a", 0), ("b", 32))]
    placed = shared.place([], wanted)
    assert placed is not None
    too_big = [Tensor("a", np.full(4, 7, np.int32)), Tensor("b", np.ones(5, np.int32))]
    with pytest.raises(InvalidArgument, match=r"output 'b': 'shared_memory_byte_size' 16 is "
                                              r"too small: the output has 20 bytes"):
        placed.write(too_big)
    assert path.read_bytes() == bytes(64)  # a refusal writes nothing, not even 'a'
    written = placed.write([Tensor("a", np.full(4, 7, np.int32)),
                            Tensor("b", np.arange(6, dtype=np.int16)[::2]),  # a strided view
                            Tensor("c", np.ones(2))])  # not in a region: left alone
    assert set(written) == {"a", "b"}
    assert written["b"].datatype == "INT16" and written["b"].shape == [3]
    assert written["b"].parameters == {"shared_memory_region": "o", "shared_memory_offset": 32,
                                       "shared_memory_byte_size": 6}
    data = path.read_bytes()
    assert np.frombuffer(data[:16], np.int32).tolist() == [7, 7, 7, 7]
    assert np.frombuffer(data[32:38], np.int16).tolist() == [0, 2, 4]


def test_an_output_over_its_own_input_is_written_whole(shared: SystemSharedMemory,
                                                     shm_dir: Path) -> None:
    """A model that answers a view of its input, into a region that overlaps that input
    (shifted by one element either way): the bytes land as the output held them."""
    path = obj(shm_dir, "data", 64)
    shared.register("r", "/data", 0, 64)
    with client_view(path) as client:
        for shift in (4, -4):
            client[:] = bytes(64)
            client[8:40] = np.arange(8, dtype=np.int32).tobytes()
            placed = shared.place([x_in("r", 32, offset=8)],
                                  [("y", {"shared_memory_region": "r",
                                          "shared_memory_byte_size": 32,
                                          "shared_memory_offset": 8 + shift})])
            assert placed is not None
            placed.write([Tensor("y", placed.inputs["x"])])  # the input's own memory
            got = np.frombuffer(client[8 + shift:40 + shift], np.int32).tolist()
            assert got == list(range(8)), shift
            del placed


def test_an_output_cannot_be_both_binary_and_in_a_region(shared: SystemSharedMemory,
                                                         shm_dir: Path) -> None:
    obj(shm_dir, "out", 8)
    shared.register("o", "/out", 0, 8)
    with pytest.raises(InvalidArgument, match="output 'y': can't set both "
                                              "'shared_memory_region' and 'binary_data'"):
        shared.place([], [("y", {"shared_memory_region": "o", "shared_memory_byte_size": 8,
                                 "binary_data": True})])


def test_a_request_naming_no_region_costs_no_placement(shared: SystemSharedMemory) -> None:
    assert shared.place([("x", "FP32", [1], {}, True)], [("y", {"binary_data": True})]) is None


# ---------------------------------------------------------------- release


def test_an_unregistered_region_is_unmapped_after_its_last_view(shared: SystemSharedMemory,
                                                                shm_dir: Path) -> None:
    obj(shm_dir, "data", 64)
    shared.register("r", "/data", 0, 64)
    region = shared._regions["r"]
    placed = shared.place([x_in("r", 16)], [])
    assert placed is not None
    x = placed.inputs["x"]
    shared.unregister("r")  # a request in flight still reads x
    assert shared.status() == [] and not region.mapping.closed
    assert x.sum() == 0  # still mapped: no read of unmapped memory
    del x, placed
    gc.collect()
    shared.status()  # any later call unmaps what no view holds any more
    assert region.mapping.closed
    obj(shm_dir, "other", 8)
    shared.register("r", "/other", 0, 8)  # the name is free at once
    shared.close()
    assert shared._regions == {}


def test_close_unmaps_every_region(shared: SystemSharedMemory, shm_dir: Path) -> None:
    obj(shm_dir, "data", 64)
    shared.register("a", "/data", 0, 32)
    shared.register("b", "/data", 32, 32)
    regions = list(shared._regions.values())
    shared.close()
    assert all(r.mapping.closed for r in regions) and shared.status() == []


# ---------------------------------------------------------------- off by default


def test_off_it_refuses_naming_the_flag(shm_dir: Path) -> None:
    off = SystemSharedMemory(False, directory=str(shm_dir))
    obj(shm_dir, "data", 8)
    for call in (lambda: off.register("r", "/data", 0, 8), off.unregister,
                 off.cuda_unregister,
                 lambda: off.place([x_in("r", 8)], [])):
        with pytest.raises(Unimplemented, match="--shared-memory system") as caught:
            call()
        assert "Client shared memory is disabled" in caught.value.message
    assert off.status() == [] and off.cuda_status() == []


def test_cuda_regions_are_never_registered(shared: SystemSharedMemory, shm_dir: Path) -> None:
    obj(shm_dir, "data", 8)
    shared.register("sys", "/data", 0, 8)
    assert shared.cuda_status() == []
    shared.cuda_unregister()
    with pytest.raises(NotFound, match="'sys' is registered as system shared memory, not "
                                       "CUDA shared memory"):
        shared.cuda_status("sys")
    with pytest.raises(NotFound, match="Unable to find cuda shared memory region: 'gpu'"):
        shared.cuda_status("gpu")
