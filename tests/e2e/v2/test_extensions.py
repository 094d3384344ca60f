"""Triton's model configuration and statistics extensions, with tritonclient over HTTP and
gRPC: what perf_analyzer and Triton's example clients ask before and after they infer.
"""

from __future__ import annotations

import typing as t

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from google.protobuf import json_format
from tritonclient.utils import InferenceServerException

import tensorwire
from tensorwire.validators import DType, Shape
from tests.support.http_calls import get
from tests.support.servers import serving
from tests.support.v2_calls import grpc_client, http_client

Rows = t.Annotated[np.ndarray, Shape((-1, 3)), DType("float32")]
Image = t.Annotated[np.ndarray, Shape((-1, 8, 8, 3)), DType("uint8")]


@tensorwire.service
class Configured:
    """Models whose configuration says what their signature says."""

    @tensorwire.api(batchable=True, max_batch_size=16, max_latency_ms=2)
    def ext_rows(self, rows: Rows) -> Rows:
        """Batchable along the first dimension: Triton's max_batch_size."""
        return rows * 2

    @tensorwire.api(batchable=True, max_batch_size=8)
    def ext_pixels(self, image: Image) -> t.Annotated[np.ndarray, Shape((-1,)),
                                                      DType("float32")]:
        """An NHWC image batch in, one score per image out."""
        return image.reshape(len(image), -1).mean(axis=1).astype(np.float32)

    @tensorwire.api
    def ext_scale(self, x: t.Annotated[np.ndarray, Shape((2, -1)), DType("int64")],
                  factor: int = 2) -> t.Annotated[np.ndarray, DType("int64")]:
        """Not batchable: the whole shape, an optional input."""
        if factor < 0:
            raise ValueError("no negative factors")
        return x * factor


@pytest.fixture(scope="module")
def server() -> t.Iterator[t.Any]:
    with serving(Configured) as running:
        yield running


def rows_input(client: t.Any, n: int) -> t.Any:
    module = th if isinstance(client, th.InferenceServerClient) else tg
    x = module.InferInput("rows", [n, 3], "FP32")
    x.set_data_from_numpy(np.ones((n, 3), np.float32))
    return x


# ---------------------------------------------------------------- model configuration


def test_a_batchable_models_config_over_http(server: t.Any) -> None:
    config = http_client(server).get_model_config("ext_rows")
    assert config["name"] == "ext_rows" and config["max_batch_size"] == 16
    assert config["input"] == [{"name": "rows", "data_type": "TYPE_FP32",
                                "format": "FORMAT_NONE", "dims": [3],
                                "is_shape_tensor": False, "allow_ragged_batch": False,
                                "optional": False}]
    assert [(o["name"], o["data_type"], o["dims"]) for o in config["output"]] == [
        ("result", "TYPE_FP32", [3])]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
    assert config["model_transaction_policy"] == {"decoupled": False}
    assert http_client(server).get_model_config("ext_rows", "1") == config


def test_the_same_config_over_grpc(server: t.Any) -> None:
    over_http = http_client(server).get_model_config("ext_pixels")
    reply = grpc_client(server).get_model_config("ext_pixels")
    config = reply.config
    assert (config.name, config.max_batch_size) == ("ext_pixels", 8)
    (image,) = config.input
    assert (image.data_type, list(image.dims)) == (tg.model_config_pb2.TYPE_UINT8, [8, 8, 3])
    # what Triton's image client looks for to lay out its pixels
    assert image.format == tg.model_config_pb2.ModelInput.FORMAT_NHWC
    # a scalar per item: Triton's dims [1], reshaped to []
    (score,) = config.output
    assert list(score.dims) == [1] and score.HasField("reshape")
    as_json = json_format.MessageToDict(config, preserving_proto_field_name=True)
    assert as_json["input"][0]["format"] == over_http["input"][0]["format"] == "FORMAT_NHWC"
    assert over_http["output"][0]["reshape"] == {"shape": []}


def test_a_model_that_does_not_batch_keeps_its_whole_shape(server: t.Any) -> None:
    config = http_client(server).get_model_config("ext_scale")
    assert config["max_batch_size"] == 0 and "dynamic_batching" not in config
    assert [(i["name"], i["data_type"], i["dims"], i["optional"]) for i in config["input"]] == [
        ("x", "TYPE_INT64", [2, -1], False), ("factor", "TYPE_INT64", [1], True)]
    grpc_config = grpc_client(server).get_model_config("ext_scale").config
    assert [list(i.dims) for i in grpc_config.input] == [[2, -1], [1]]


def test_config_of_an_unknown_model_or_version(server: t.Any) -> None:
    reply = get(f"{server.http_url}/v2/models/nope/config")
    assert reply.status == 404 and "unknown model 'nope'" in reply.json()["error"]
    assert get(f"{server.http_url}/v2/models/ext_rows/versions/2/config").status == 404
    with pytest.raises(InferenceServerException) as caught:
        grpc_client(server).get_model_config("nope")
    assert "NOT_FOUND" in str(caught.value.status())


def test_server_metadata_lists_the_extensions(server: t.Any) -> None:
    extensions = http_client(server).get_server_metadata()["extensions"]
    assert {"binary_tensor_data", "model_configuration", "statistics"} <= set(extensions)
    meta = grpc_client(server).get_server_metadata(as_json=True)
    assert meta["extensions"] == extensions


# ---------------------------------------------------------------- statistics


def stats_of(reply: dict[str, t.Any], name: str) -> dict[str, t.Any]:
    (entry,) = [m for m in reply["model_stats"] if m["name"] == name]
    return entry


def test_statistics_count_what_both_protocols_ran(server: t.Any) -> None:
    http, grpc_ = http_client(server), grpc_client(server)
    x = th.InferInput("x", [2, 2], "INT64")
    x.set_data_from_numpy(np.arange(4, dtype=np.int64).reshape(2, 2))
    for _ in range(3):
        http.infer("ext_scale", [x])
    gx = tg.InferInput("x", [2, 2], "INT64")
    gx.set_data_from_numpy(np.arange(4, dtype=np.int64).reshape(2, 2))
    grpc_.infer("ext_scale", [gx])
    bad = th.InferInput("factor", [1], "INT64")
    bad.set_data_from_numpy(np.array([-1], np.int64))
    with pytest.raises(InferenceServerException):
        http.infer("ext_scale", [x, bad])

    entry = stats_of(http.get_inference_statistics("ext_scale"), "ext_scale")
    stats = entry["inference_stats"]
    assert entry["version"] == "1"
    assert stats["success"]["count"] == 4 and stats["fail"]["count"] == 1
    assert stats["success"]["ns"] > 0 and stats["fail"]["ns"] > 0
    for phase in ("compute_input", "compute_infer", "compute_output"):
        assert stats[phase]["count"] == 4 and stats[phase]["ns"] > 0, phase
    # no queue of its own, but counted: perf_analyzer finds the version by this count
    assert stats["queue"] == {"count": 4, "ns": 0}
    # the phases are parts of the successful requests' time
    parts = sum(stats[p]["ns"] for p in ("compute_input", "compute_infer", "compute_output"))
    assert parts <= stats["success"]["ns"] * 1.001
    assert (entry["inference_count"], entry["execution_count"]) == (4, 4)
    assert entry["batch_stats"][0]["batch_size"] == 1
    assert entry["last_inference"] > 1_600_000_000_000  # milliseconds since the epoch

    over_grpc = grpc_.get_inference_statistics("ext_scale", as_json=True)
    (grpc_entry,) = over_grpc["model_stats"]
    # JSON of the protobuf: uint64 as strings
    assert int(grpc_entry["inference_stats"]["success"]["count"]) == 4
    assert int(grpc_entry["execution_count"]) == 4


def test_statistics_of_a_batchable_model_count_batches(server: t.Any) -> None:
    http, grpc_ = http_client(server), grpc_client(server)
    for n in (1, 2, 2):
        http.infer("ext_rows", [rows_input(http, n)])
    entry = stats_of(http.get_inference_statistics("ext_rows", "1"), "ext_rows")
    stats = entry["inference_stats"]
    assert stats["success"]["count"] == 3
    # one wait per request for its batch, or per part where the batcher split a request:
    # its latency model caps a batch at 1 item when two points fitted on a busy machine
    # make an item dearer than max_latency_ms (a 2-row request is then two batches)
    assert 3 <= stats["queue"]["count"] <= 5
    assert entry["inference_count"] == 5  # items: 1 + 2 + 2
    batches = {b["batch_size"]: b for b in entry["batch_stats"]}
    assert sum(size * b["compute_infer"]["count"] for size, b in batches.items()) == 5
    assert entry["execution_count"] == sum(b["compute_infer"]["count"]
                                           for b in batches.values())
    # requests one after another: a batch holds (parts of) one request
    assert 3 <= entry["execution_count"] <= stats["queue"]["count"]
    assert all(b["compute_infer"]["ns"] > 0 for b in batches.values())
    reply = grpc_.get_inference_statistics("ext_rows")
    (model,) = reply.model_stats
    assert model.inference_count == 5 and model.inference_stats.success.count == 3


def test_statistics_of_every_model_and_unknown_ones(server: t.Any) -> None:
    every = http_client(server).get_inference_statistics()
    names = [m["name"] for m in every["model_stats"]]
    assert names == ["ext_rows", "ext_pixels", "ext_scale"]
    assert get(f"{server.http_url}/v2/models/nope/stats").status == 404
    assert get(f"{server.http_url}/v2/models/ext_rows/versions/9/stats").status == 404
    with pytest.raises(InferenceServerException) as caught:
        grpc_client(server).get_inference_statistics("nope")
    assert "NOT_FOUND" in str(caught.value.status())


def test_statistics_need_the_metrics() -> None:
    with serving(Configured, metrics=False) as running:
        reply = get(f"{running.http_url}/v2/models/stats")
        assert reply.status == 501 and "--no-metrics" in reply.json()["error"]
        with pytest.raises(InferenceServerException) as caught:
            grpc_client(running).get_inference_statistics()
        assert "UNIMPLEMENTED" in str(caught.value.status())
        extensions = http_client(running).get_server_metadata()["extensions"]
        assert "statistics" not in extensions and "model_configuration" in extensions


# ---------------------------------------------------------------- the whole service


def test_every_rpc_of_tritons_service_is_answered(server: t.Any) -> None:
    """Each of the 20 rpcs is served: the ones of extensions tensorwire does not support
    answer UNIMPLEMENTED naming the extension, never gRPC's "Method not found!"; those
    of system shared memory, off by default, name the flag that turns it on (its status,
    and CUDA's, answer that there are no regions)."""
    import grpc

    from tensorwire import inference as pb

    unsupported = {"SystemSharedMemoryRegister": "--shared-memory system",
                   "SystemSharedMemoryUnregister": "--shared-memory system",
                   "CudaSharedMemoryRegister": "'cuda_shared_memory' extension",
                   "CudaSharedMemoryUnregister": "--shared-memory system",
                   "TraceSetting": "'trace' extension", "LogSettings": "'logging' extension"}
    with grpc.insecure_channel(server.grpc_target) as channel:
        for method in pb.SERVICE.methods:
            if method.client_streaming:
                continue  # ModelStreamInfer: tests/e2e/v2/test_protocol.py
            call = channel.unary_unary(pb.method_path(method.name))
            try:
                call(b"", timeout=10)
            except grpc.RpcError as exc:
                assert "Method not found" not in (exc.details() or ""), method.name
                if method.name in unsupported:
                    assert exc.code() == grpc.StatusCode.UNIMPLEMENTED, method.name
                    assert unsupported.pop(method.name) in exc.details()
            else:
                assert method.name not in unsupported
    assert unsupported == {}


def test_tritonclients_shared_memory_calls_name_the_extension(server: t.Any) -> None:
    with pytest.raises(InferenceServerException) as over_grpc:
        grpc_client(server).register_system_shared_memory("r", "/r", 8)
    assert "--shared-memory system" in str(over_grpc.value)
    with pytest.raises(InferenceServerException) as over_http:
        http_client(server).register_cuda_shared_memory("r", b"\0" * 64, 0, 8)
    assert "'cuda_shared_memory' extension" in str(over_http.value)
    reply = get(f"{server.http_url}/v2/trace/setting")
    assert reply.status == 501 and "'trace' extension" in reply.json()["error"]


def test_the_repository_index_over_grpc(server: t.Any) -> None:
    index = grpc_client(server).get_model_repository_index(as_json=True)
    assert [(m["name"], m["state"]) for m in index["models"]] == [
        ("ext_rows", "READY"), ("ext_pixels", "READY"), ("ext_scale", "READY")]
    assert http_client(server).get_model_repository_index() == index["models"]
