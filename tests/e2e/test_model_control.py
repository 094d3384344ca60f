"""Model control (issue 34 item 2): Triton's repository index, load and unload with
tritonclient over HTTP and gRPC; refused unless `--model-control explicit`; the unit is
a service; health, readiness, reflection, the documents and the metrics follow; a failed
load changes nothing; an unload lets the calls in flight finish; with several workers
the others follow."""

from __future__ import annotations

import threading
import time
import typing as t

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from tritonclient.utils import InferenceServerException

from tensorwire.runtime.hosted import Placement
from tests.support import many_services
from tests.support.http_calls import get, post
from tests.support.many_services import Flowers, RowSums, Wine
from tests.support.servers import serving, spawn_cli
from tests.support.v2_calls import grpc_client, http_client

X = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
ROWS = "many.rows.RowSums"


def listed(target: str) -> set[str]:
    """The gRPC services reflection lists."""
    with grpc.insecure_channel(target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        (reply,) = list(stub.ServerReflectionInfo(iter([ask]), timeout=30))
    return {s.name for s in reply.list_services_response.service}


def health(target: str, name: str) -> int:
    with grpc.insecure_channel(target) as channel:
        return health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=name), timeout=5).status


def states(server: t.Any) -> dict[str, str]:
    return {m["name"]: m["state"] for m in http_client(server).get_model_repository_index()}


# ---------------------------------------------------------------- control off


def test_load_and_unload_are_refused_unless_model_control_is_explicit() -> None:
    with serving(Flowers) as server:
        http, grpc_ = http_client(server), grpc_client(server)
        assert [m["state"] for m in http.get_model_repository_index()] == ["READY", "READY"]
        assert grpc_.get_model_repository_index().models[0].name == "predict"
        for call in (http.load_model, http.unload_model, grpc_.load_model,
                     grpc_.unload_model):
            with pytest.raises(InferenceServerException) as caught:
                call("predict")
            assert "model control is off: start the server with --model-control explicit" \
                in str(caught.value)
        reply = post(f"{server.http_url}/v2/repository/models/predict/load", b"")
        assert reply.status == 403
        with pytest.raises(InferenceServerException) as caught:
            grpc_.load_model("predict")
        assert "PERMISSION_DENIED" in str(caught.value.status())
        assert states(server) == {"predict": "READY", "species": "READY"}


# ---------------------------------------------------------------- control explicit


@pytest.fixture
def server() -> t.Iterator[t.Any]:
    """Flowers under `iris`, loaded; RowSums known but not loaded."""
    with serving([(Flowers, Placement(prefix="iris")),
                  (RowSums, Placement(load=False))], model_control="explicit",
                 graceful_timeout=5.0) as running:
        yield running


def test_a_service_not_loaded_is_listed_and_refuses_calls(server: t.Any) -> None:
    index = {m["name"]: m for m in http_client(server).get_model_repository_index()}
    assert index["iris.predict"]["state"] == "READY"
    assert "a model of service Flowers, with iris.species" in index["iris.predict"]["reason"]
    shout = index["shout"]
    assert shout["state"] == "UNAVAILABLE"
    assert shout["reason"] == ("service RowSums is not loaded; load it with POST "
                               "/v2/repository/models/generation_of/load")
    reply = post(f"{server.http_url}/shout", {"text": "hi"})
    assert reply.status == 503 and "RowSums is not loaded" in reply.json()["error"]
    assert get(f"{server.http_url}/readyz").status == 200  # unloaded on purpose
    assert not http_client(server).is_model_ready("shout")
    assert health(server.grpc_target, ROWS) == health_pb2.HealthCheckResponse.NOT_SERVING
    assert ROWS not in listed(server.grpc_target)
    assert "/shout" not in get(f"{server.http_url}/docs.json").json()["paths"]


def test_loading_one_model_loads_its_service_and_everything_follows(server: t.Any) -> None:
    http_client(server).load_model("row_sums")  # tritonclient over HTTP
    assert states(server)["shout"] == "READY"  # the same service: loaded with it
    assert post(f"{server.http_url}/shout", {"text": "hi"}).text == "HI"
    x = tg.InferInput("rows", [2, 2], "FP32")
    x.set_data_from_numpy(np.ones((2, 2), np.float32))
    assert grpc_client(server).infer("row_sums", [x]).as_numpy("result").tolist() == [2, 2]
    assert health(server.grpc_target, ROWS) == health_pb2.HealthCheckResponse.SERVING
    assert ROWS in listed(server.grpc_target)
    assert "/shout" in get(f"{server.http_url}/docs.json").json()["paths"]
    assert "/shout" in [r["route"] for r in get(f"{server.http_url}/schema.json").json()[
        "routes"]]
    metrics = get(f"{server.http_url}/metrics").text
    assert 'tensorwire_requests_total{api="shout",protocol="http",status="200"}' in metrics


def test_unloading_over_grpc_takes_the_whole_service_out(server: t.Any) -> None:
    grpc_client(server).unload_model("iris.species")
    assert states(server) == {"iris.predict": "UNAVAILABLE", "iris.species": "UNAVAILABLE",
                              "generation_of": "UNAVAILABLE", "wait": "UNAVAILABLE",
                              "row_sums": "UNAVAILABLE", "shout": "UNAVAILABLE"}
    assert post(f"{server.http_url}/iris/predict", {"x": X.tolist()}).status == 503
    assert get(f"{server.http_url}/iris/readyz").status == 503
    assert get(f"{server.http_url}/iris/schema.json").status == 404
    assert health(server.grpc_target, "many.iris.Flowers") == \
        health_pb2.HealthCheckResponse.NOT_SERVING
    grpc_client(server).unload_model("iris.species")  # unloaded already: nothing to do
    grpc_client(server).load_model("iris")  # the prefix names the service too
    assert post(f"{server.http_url}/iris/predict", {"x": X.tolist()}).json() == [10.0]


def test_loading_a_loaded_service_reloads_it_and_closes_the_old_instance(
        server: t.Any) -> None:
    http = http_client(server)
    http.load_model("shout")
    first = post(f"{server.http_url}/generation_of", {}).json()
    http.load_model("shout")  # a new instance (new weights, say); the old one closed
    second = post(f"{server.http_url}/generation_of", {}).json()
    assert second == first + 1
    assert len(many_services.CLOSED) >= 1


def test_an_unload_lets_the_calls_in_flight_finish(server: t.Any) -> None:
    http_client(server).load_model("wait")
    answers: list[t.Any] = []
    call = threading.Thread(target=lambda: answers.append(
        post(f"{server.http_url}/wait", {"seconds": 0.8})))
    call.start()
    time.sleep(0.3)  # in flight
    began = time.monotonic()
    http_client(server).unload_model("wait")
    took = time.monotonic() - began
    call.join(10)
    assert answers[0].status == 200 and answers[0].text == "waited 0.8"
    assert took >= 0.3  # it waited for the call
    assert post(f"{server.http_url}/wait", {"seconds": 0}).status == 503


def test_an_unknown_model_is_not_found_and_changes_nothing(server: t.Any) -> None:
    http_client(server).load_model("shout")
    before = states(server)
    with pytest.raises(InferenceServerException, match="unknown model 'wine'"):
        http_client(server).load_model("wine")  # Wine is not one of this server's
    reply = post(f"{server.http_url}/v2/repository/models/wine/load", b"")
    assert reply.status == 404
    assert states(server) == before


def test_a_failed_load_leaves_the_server_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    with serving([(Flowers, Placement()), (Wine, Placement(prefix="wine", load=False))],
                 model_control="explicit") as server:
        monkeypatch.setenv("MANY_WINE_FAILS", "1")
        for client in (http_client(server), grpc_client(server)):
            with pytest.raises(InferenceServerException) as caught:
                client.load_model("wine.predict")
            assert str(caught.value).count("\n") == 0
            assert ("failed to load Wine: service Wine failed in Wine.__init__: "
                    "FileNotFoundError: wine.onnx: no such file") in str(caught.value)
        assert states(server) == {"predict": "READY", "species": "READY",
                                  "wine.predict": "UNAVAILABLE"}
        monkeypatch.delenv("MANY_WINE_FAILS")
        http_client(server).load_model("wine.predict")
        # a reload that fails leaves the old instance serving
        monkeypatch.setenv("MANY_WINE_FAILS", "1")
        with pytest.raises(InferenceServerException, match="failed to load Wine"):
            grpc_client(server).load_model("wine")
        assert post(f"{server.http_url}/wine/predict", {"x": X.tolist()}).json() == [2.5]


def test_load_refuses_what_it_cannot_honour(server: t.Any) -> None:
    with pytest.raises(InferenceServerException, match="load parameter 'config'"):
        http_client(server).load_model("shout", config='{"max_batch_size": 4}')
    with pytest.raises(InferenceServerException, match="unknown model 'nope'"):
        grpc_client(server).load_model("nope")


def test_auth_applies_to_model_control() -> None:
    with serving([(Flowers, Placement())], model_control="explicit",
                 auth_token="s3cret") as server:
        reply = post(f"{server.http_url}/v2/repository/models/predict/unload", b"")
        assert reply.status == 401
        with pytest.raises(InferenceServerException) as caught:
            grpc_client(server).unload_model("predict")
        assert "UNAUTHENTICATED" in str(caught.value.status())
        th.InferenceServerClient(f"127.0.0.1:{server.http_port}").unload_model(
            "predict", headers={"Authorization": "Bearer s3cret"})
        index = post(f"{server.http_url}/v2/repository/index", b"",
                     headers={"Authorization": "Bearer s3cret"}).json()
        assert [m["state"] for m in index] == ["UNAVAILABLE", "UNAVAILABLE"]


# ---------------------------------------------------------------- several workers


@pytest.mark.slow
def test_with_two_workers_the_other_worker_follows() -> None:
    server = spawn_cli("tests.support.many_services:Flowers",
                       "tests.support.many_services:RowSums", "--workers", "2",
                       "--model-control", "explicit")
    try:
        http_client(server).unload_model("shout")  # lands on one worker
        seen: dict[str, bool] = {}
        deadline = time.monotonic() + 30
        while len(seen) < 2 or not all(not ready for ready in seen.values()):
            assert time.monotonic() < deadline, f"workers did not follow: {seen}"
            with grpc.insecure_channel(server.grpc_target) as channel:  # a new connection
                stub = health_pb2_grpc.HealthStub(channel)
                call = stub.Check.with_call(health_pb2.HealthCheckRequest(service=ROWS),
                                            timeout=5)
                worker = dict(call[1].initial_metadata())["tensorwire-worker"]
                seen[worker] = call[0].status == health_pb2.HealthCheckResponse.SERVING
        http_client(server).load_model("shout")
        deadline = time.monotonic() + 30
        answered = 0
        while answered < 20:  # twenty fresh connections in a row find it loaded
            assert time.monotonic() < deadline, "workers did not follow the load"
            with th.InferenceServerClient(f"127.0.0.1:{server.http_port}") as client:
                answered = answered + 1 if client.is_model_ready("shout") else 0
    finally:
        server.stop()
