"""Services that call services on the wire (issue 35): a pipeline serving its dependency
in-process, and a pipeline calling it in another server process over gRPC, both
reached over HTTP and gRPC; tensors, models, files, streams out and in; the deadline, trace
context, request id and cancellation crossing; a dependency that is down; batching of
the pipeline's calls with everyone else's."""

from __future__ import annotations

import time
import typing as t
from pathlib import Path

import numpy as np
import pytest

import tensorwire
from tensorwire.errors import ClientTimeout, InternalError, ServiceUnavailable
from tensorwire.runtime.hosted import Placement
from tests.support import composed_services as composed
from tests.support.composed_services import Item, Model, Pipeline
from tests.support.http_calls import post
from tests.support.servers import RunningServer, serving, spawn_cli

PIPELINE = "composed.pipeline.Pipeline"
X = np.arange(8, dtype=np.float32).reshape(2, 4)
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture(scope="module")
def together() -> t.Iterator[RunningServer]:
    """`tensorwire serve ...:Pipeline`: the model served with it, called in-process."""
    with serving(Pipeline) as running:
        yield running


@pytest.fixture(scope="module")
def model_process() -> t.Iterator[RunningServer]:
    """The model alone, in a process of its own (`tensorwire serve ...:Model`)."""
    server = spawn_cli("tests.support.composed_services:Model")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def apart(model_process: RunningServer) -> t.Iterator[RunningServer]:
    """The pipeline with `--dependency Model=grpc://...`: the model's calls go over gRPC
    to the other process."""
    placed = f"Model=grpc://{model_process.grpc_target}"
    with serving(Pipeline, dependencies=[placed]) as running:
        yield running


def clients(server: RunningServer) -> list[tensorwire.SyncClient]:
    return [tensorwire.SyncClient(server.http_url),
            tensorwire.SyncClient(f"grpc://{server.grpc_target}", service=PIPELINE)]


@pytest.mark.parametrize("placement", ["together", "apart"])
def test_every_kind_of_value_crosses_on_both_protocols(placement: str, tmp_path: Path,
                                                       request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(placement)
    document = tmp_path / "doc.txt"
    document.write_bytes(b"hello")
    for client in clients(server):
        with client:
            assert client.classify(x=X).tolist() == [12.0, 44.0]
            assert client.classify_async(x=X).tolist() == [12.0, 44.0]
            assert client.weigh(item={"name": "apple", "weight": 1.5}) == {
                "name": "APPLE", "weight": 3.0}
            assert Path(client.stamp(document=document)).read_bytes() == b"stamped:hello"
            assert client.spell(word="abc") == ["a", "b", "c"]
            assert client.count(n=3) == [0, 1, 2]
            assert client.count_first(n=1000) == 0
            assert client.total(frames=[X, X[:1]]) == 34.0  # a streamed input


def test_in_process_the_dependency_has_no_routes_of_its_own(together: RunningServer) -> None:
    """The server describes the pipeline alone: a client at its address reaches it."""
    assert post(f"{together.http_url}/model/classify", {"x": X.tolist()}).status == 404
    with tensorwire.SyncClient(f"grpc://{together.grpc_target}") as client:  # one service
        assert sorted(api.name for api in client.list_apis())[:2] == ["bad_input", "batched"]


def test_in_process_calls_count_in_the_dependencys_metrics(together: RunningServer) -> None:
    import re
    import urllib.request

    def answered() -> float:
        text = urllib.request.urlopen(f"{together.http_url}/metrics").read().decode()
        found = re.search(r'tensorwire_requests_total\{api="model\.classify",'
                          r'protocol="inprocess",status="200"\} (\S+)', text)
        return float(found.group(1)) if found else 0.0

    before = answered()
    with tensorwire.SyncClient(together.http_url) as client:
        client.classify(x=X)
        client.classify_async(x=X)
    assert answered() == before + 2


@pytest.fixture(scope="module")
def exposed() -> t.Iterator[RunningServer]:
    """`tensorwire serve ...:Pipeline model=...:Model`: the model served too, under a
    prefix, and the pipeline calling that one."""
    with serving([(Pipeline, Placement()), (Model, Placement(prefix="model"))]) as running:
        yield running


def test_a_dependency_served_too_is_the_one_called(exposed: RunningServer) -> None:
    assert post(f"{exposed.http_url}/model/classify", {"x": X.tolist()}).json() == [
        6.0, 22.0]
    with tensorwire.SyncClient(f"{exposed.http_url}/model") as client:
        assert client.classify(x=X).tolist() == [6.0, 22.0]
    with tensorwire.SyncClient(f"grpc://{exposed.grpc_target}", service=PIPELINE) as client:
        assert client.classify(x=X).tolist() == [12.0, 44.0]
    assert composed.SEEN["classify"] is composed.SEEN["pipeline.classify"]


def test_in_process_a_tensor_is_not_copied(together: RunningServer) -> None:
    with tensorwire.SyncClient(f"grpc://{together.grpc_target}", service=PIPELINE) as client:
        client.classify(x=X)
    assert composed.SEEN["classify"] is composed.SEEN["pipeline.classify"]
    with tensorwire.SyncClient(together.http_url) as client:
        client.weigh(item=Item(name="pear"))
    assert composed.SEEN["weigh"] is composed.SEEN["pipeline.weigh"]


@pytest.mark.parametrize("placement", ["together", "apart"])
def test_request_id_and_trace_context_cross(placement: str,
                                            request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(placement)
    headers = {"x-request-id": "req-35", "traceparent": TRACEPARENT}
    for client in clients(server):
        with client.with_options(headers=headers) as view:
            for api in ("seen", "seen_async"):
                seen = view.call(api)
                assert seen["request_id"] == "req-35", (client.protocol, api)
                assert seen["traceparent"] == TRACEPARENT, (client.protocol, api)
                assert seen["protocol"] == ("inprocess" if placement == "together"
                                            else "grpc")
            for api in ("seen_stream", "seen_stream_async"):  # generators' calls too
                assert [c["request_id"] for c in view.call(api, n=2)] == ["req-35"] * 2
        client.close()


@pytest.mark.parametrize("placement", ["together", "apart"])
def test_the_dependencys_refusal_is_the_pipelines_500(placement: str,
                                                      request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(placement)
    for client in clients(server):
        with client:
            with pytest.raises(InternalError) as caught:
                client.bad_input()
            message = caught.value.message
            assert message.startswith("dependency Model.classify refused its input: x"), \
                message
            with pytest.raises(InternalError, match=r"dependency Model\.fail failed"):
                client.fail(why="boom")


def test_a_dependency_that_is_down_is_a_503_naming_it() -> None:
    from tests.support.servers import free_port

    placed = f"Model=grpc://127.0.0.1:{free_port()}"
    with serving(Pipeline, dependencies=[placed]) as server:
        for client in clients(server):
            with client, pytest.raises(ServiceUnavailable) as caught:
                client.classify(x=X)
            assert caught.value.status_code == 503
            assert "dependency Model" in caught.value.message
            assert "down" in caught.value.message


@pytest.fixture(scope="module")
def model_beside() -> t.Iterator[RunningServer]:
    """The model in a server of its own in this process (its state readable here),
    called over gRPC on loopback."""
    with serving(Model) as running:
        yield running


@pytest.fixture(scope="module")
def over_grpc(model_beside: RunningServer) -> t.Iterator[RunningServer]:
    with serving(Pipeline, dependencies=[f"Model=grpc://{model_beside.grpc_target}"]
                 ) as running:
        yield running


@pytest.mark.parametrize("api, kind", [("wait", "async"), ("wait_def", "async"),
                                       ("wait_in_thread", "def")])
@pytest.mark.parametrize("placement", ["together", "over_grpc"])
def test_the_callers_deadline_cancels_the_dependency_call(
        placement: str, api: str, kind: str, request: pytest.FixtureRequest) -> None:
    server = request.getfixturevalue(placement)
    composed.CANCELLED[kind].clear()
    with tensorwire.SyncClient(f"grpc://{server.grpc_target}", service=PIPELINE,
                               timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(ClientTimeout):
            client.call(api, seconds=10.0)
        assert time.monotonic() - started < 5
    assert composed.CANCELLED[kind].wait(5), "the dependency's call ran on"


@pytest.mark.parametrize("placement", ["together", "over_grpc"])
def test_a_client_that_leaves_cancels_the_dependency_call(
        placement: str, request: pytest.FixtureRequest) -> None:
    import asyncio

    server = request.getfixturevalue(placement)
    composed.CANCELLED["async"].clear()

    async def leave_early() -> None:
        async with tensorwire.AsyncClient(server.http_url) as client:
            call = asyncio.ensure_future(client.wait(seconds=10.0))
            await asyncio.sleep(0.3)
            call.cancel()  # the HTTP connection closes: the pipeline's handler is cancelled

    asyncio.run(leave_early())
    assert composed.CANCELLED["async"].wait(5), "the dependency's call ran on"


@pytest.mark.parametrize("placement", ["exposed", "over_grpc"])
def test_pipeline_calls_batch_with_direct_calls(placement: str,
                                                request: pytest.FixtureRequest) -> None:
    import asyncio

    server = request.getfixturevalue(placement)
    model = (f"grpc://{server.grpc_target}" if placement == "exposed"
             else f"grpc://{request.getfixturevalue('model_beside').grpc_target}")

    async def both() -> list[float]:
        async with (tensorwire.AsyncClient(f"grpc://{server.grpc_target}",
                                           service=PIPELINE) as pipeline,
                    tensorwire.AsyncClient(model, service="composed.model.Model") as direct):
            first = asyncio.ensure_future(direct.batched(x=np.full((1, 4), 3, np.float32)))
            await asyncio.sleep(0.01)  # the model is busy: what comes now queues up
            calls = [pipeline.batched(x=np.full((1, 4), 1, np.float32)) for _ in range(8)]
            calls += [direct.batched(x=np.full((1, 4), 2, np.float32)) for _ in range(8)]
            out = await asyncio.gather(first, *calls)
        return [float(r[0]) for r in out]

    composed.BATCHES.clear()
    assert asyncio.run(both()) == [30.0] + [10.0] * 8 + [20.0] * 8
    assert any({1.0, 2.0} <= set(batch) for batch in composed.BATCHES), composed.BATCHES


def test_a_tracing_pipeline_passes_its_own_span_on(model_beside: RunningServer) -> None:
    """With tracing on, the dependency's call carries the pipeline's span as its parent
    (the same trace as the client's), not the client's span."""
    from opentelemetry.sdk.trace import TracerProvider

    placed = f"Model=grpc://{model_beside.grpc_target}"
    with serving(Pipeline, dependencies=[placed], tracing=True,
                 tracer_provider=TracerProvider()) as server:
        for client in clients(server):
            with client.with_options(headers={"traceparent": TRACEPARENT}) as view:
                for api in ("seen", "seen_async"):
                    _, trace_id, parent, _ = view.call(api)["traceparent"].split("-")
                    assert trace_id == TRACEPARENT.split("-")[1], (client.protocol, api)
                    assert parent != TRACEPARENT.split("-")[2], (client.protocol, api)
            client.close()


def test_a_dependency_placed_at_an_http_url(model_process: RunningServer) -> None:
    with (serving(Pipeline, dependencies=[f"Model={model_process.http_url}"]) as server,
          tensorwire.SyncClient(f"grpc://{server.grpc_target}", service=PIPELINE) as client):
        assert client.classify(x=X).tolist() == [12.0, 44.0]
        assert client.weigh(item={"name": "fig"}) == {"name": "FIG", "weight": 2.0}
        assert client.spell(word="ok") == ["o", "k"]
        seen = client.with_options(headers={"x-request-id": "req-h"}).seen()
        assert (seen["request_id"], seen["protocol"]) == ("req-h", "http")
