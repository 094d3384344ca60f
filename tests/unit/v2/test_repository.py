"""`tensorwire.v2.repository.Repository`: the one data plane of both v2 transports, called
directly: health from the runtime's state, the index with each model's state and
reason, model lookup and its NotFound messages, and the infer steps (refusals before
decoding, outputs filtered to those requested)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest
from pydantic import BaseModel

import tensorwire
from tensorwire.codecs.v2_facet import Tensor
from tensorwire.errors import InvalidArgument, NotFound, Unimplemented
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tensorwire.v2.repository import SERVER_NAME, Repository
from tensorwire.version import __version__
from tensorwire.wire.oip import BINARY_EXTENSION


class Stats(BaseModel):
    mean: float
    total: float


@tensorwire.service
class Plane:
    @tensorwire.api
    def stats(self, x: np.ndarray) -> Stats:
        return Stats(mean=float(x.mean()), total=float(x.sum()))

    @tensorwire.api
    def ticks(self, n: int) -> Iterator[int]:
        yield from range(n)


@pytest.fixture
async def runtime() -> AsyncIterator[ServiceRuntime]:
    runtime = ServiceRuntime(tensorwire.get_service_spec(Plane), Settings())
    await runtime.start()
    try:
        yield runtime
    finally:
        await runtime.close()


@pytest.fixture
def repository(runtime: ServiceRuntime) -> Repository:
    return Repository(runtime)


def test_one_model_per_api_named_after_it(repository: Repository) -> None:
    assert list(repository.models) == ["stats", "ticks"]
    assert repository.models["stats"].api is repository.service_of("stats").spec.apis["stats"]
    assert repository.plan("stats") is repository.service_of("stats").runtime.plan("stats")


def test_server_metadata_names_the_server_and_its_binary_extension(
        repository: Repository) -> None:
    metadata = repository.server_metadata()
    assert (metadata["name"], metadata["version"]) == (SERVER_NAME, __version__)
    assert BINARY_EXTENSION in metadata["extensions"]


def test_health_follows_the_runtime(repository: Repository, runtime: ServiceRuntime
                                    ) -> None:
    stats, ticks = repository.models["stats"], repository.models["ticks"]
    assert repository.live and repository.ready
    assert repository.model_ready(stats) and repository.model_ready(ticks)  # decoupled
    runtime.admission.draining = True
    assert repository.live and not repository.ready  # alive while it drains
    assert not repository.model_ready(stats)
    runtime.admission.draining = False
    runtime.ready = False
    assert repository.live and not repository.ready


def test_the_index_gives_each_model_s_state_and_why(repository: Repository,
                                                    runtime: ServiceRuntime) -> None:
    stats, ticks = repository.index()
    together = "a model of service Plane, with {}: they load and unload together"
    assert stats == {"name": "stats", "version": "1", "state": "READY",
                     "reason": together.format("ticks")}
    assert ticks == {"name": "ticks", "version": "1", "state": "READY",  # decoupled
                     "reason": together.format("stats")}
    runtime.admission.draining = True
    stats, ticks = repository.index()
    assert stats == {"name": "stats", "version": "1", "state": "UNAVAILABLE",
                     "reason": "the server is shutting down; retry on another instance"}
    assert ticks["reason"] == stats["reason"]


def test_a_model_is_found_by_name_and_any_or_its_own_version(repository: Repository
                                                             ) -> None:
    stats = repository.models["stats"]
    for version in (None, "", "1"):
        assert repository.model("stats", version) is stats


def test_an_unknown_model_or_version_is_not_found_naming_what_there_is(
        repository: Repository) -> None:
    with pytest.raises(NotFound) as info:
        repository.model("nope")
    assert info.value.message == "unknown model 'nope'; this server has: stats, ticks"
    with pytest.raises(NotFound) as info:
        repository.model("stats", "2")
    assert info.value.message == "model 'stats' has no version '2'; its version is '1'"


def test_decode_refuses_a_decoupled_model_outside_the_stream_before_reading(
        repository: Repository) -> None:
    ticks = repository.models["ticks"]
    with pytest.raises(Unimplemented, match="model 'ticks' is decoupled"):
        repository.decode(ticks, {"n": Tensor("bogus", np.array([object()]))}, [], None)
    assert repository.decode(ticks, {"n": Tensor("n", np.array([3]))}, [], None,
                             stream=True) == {"n": 3}  # Triton's stream serves it


def test_decode_checks_the_requested_outputs_then_the_inputs(repository: Repository
                                                              ) -> None:
    stats = repository.models["stats"]
    x = np.arange(4, dtype=np.float32)
    assert repository.decode(stats, {"x": Tensor("x", x)}, ["mean"], None)["x"] is x
    with pytest.raises(InvalidArgument) as info:
        repository.decode(stats, {}, ["median"], None)  # before "x: Field required"
    assert info.value.detail[0]["loc"] == ["outputs", "median"]
    with pytest.raises(InvalidArgument, match=r"^x: Field required$"):
        repository.decode(stats, {}, [], None)


def test_outputs_are_every_output_or_only_those_requested(repository: Repository) -> None:
    stats = repository.models["stats"]
    result = Stats(mean=1.5, total=6.0)
    everything = repository.outputs(stats, result, [])
    assert [(t.name, t.array.tolist()) for t in everything] == [
        ("mean", [1.5]), ("total", [6.0])]
    only = repository.outputs(stats, result, ["total"])
    assert [(t.name, t.array.tolist()) for t in only] == [("total", [6.0])]
    assert [t.name for t in repository.outputs(stats, result, ["total", "mean"])] == [
        "mean", "total"]  # in the model's order
