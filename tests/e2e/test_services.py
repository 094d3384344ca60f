"""Several services in one server (issue 34 item 1): each keeps its routes, gRPC service,
OpenAPI tag, metrics labels and v2 models; a prefix moves a service's routes and model
names under it; clashes are refused at start-up naming both services."""

from __future__ import annotations

import typing as t
from pathlib import Path

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import tensorwire
from tensorwire import inference as pb
from tensorwire.runtime.hosted import Placement
from tests.support.http_calls import get, post
from tests.support.many_services import Flowers, RowSums, Wine
from tests.support.servers import serving, spawn_cli
from tests.support.v2_calls import grpc_client, http_client

X = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)


@pytest.fixture(scope="module")
def server() -> t.Iterator[t.Any]:
    """Flowers under `iris`, Wine under `wine` (both have `predict`), RowSums as is."""
    with serving([(Flowers, Placement(prefix="iris")), (Wine, Placement(prefix="wine")),
                  (RowSums, Placement())]) as running:
        yield running


def test_each_service_keeps_its_routes_under_its_prefix(server: t.Any) -> None:
    iris = post(f"{server.http_url}/iris/predict", {"x": X.tolist()})
    wine = post(f"{server.http_url}/wine/predict", {"x": X.tolist()})
    assert (iris.status, iris.json()) == (200, [10.0])
    assert (wine.status, wine.json()) == (200, [2.5])
    assert post(f"{server.http_url}/shout", {"text": "hi"}).text == "HI"
    assert post(f"{server.http_url}/predict", {"x": X.tolist()}).status == 404


def test_the_clients_reach_a_prefixed_service_at_its_prefix(server: t.Any) -> None:
    with tensorwire.SyncClient(f"{server.http_url}/iris") as client:
        assert client.species() == ["setosa", "versicolor", "virginica"]
        assert client.predict(x=X).tolist() == [10.0]
    with tensorwire.SyncClient(f"{server.http_url}/wine") as client:
        assert client.predict(x=X).tolist() == [2.5]
    with tensorwire.SyncClient(server.http_url) as client:  # the unprefixed service
        assert client.shout(text="ok") == "OK"
    with tensorwire.SyncClient(f"grpc://{server.grpc_target}",
                               service="many.rows.RowSums") as client:
        assert client.shout(text="grpc") == "GRPC"


def test_each_service_keeps_its_grpc_service_health_and_reflection(server: t.Any) -> None:
    names = ["many.iris.Flowers", "many.wine.Wine", "many.rows.RowSums"]
    with grpc.insecure_channel(server.grpc_target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for name in ["", *names, pb.SERVICE_NAME]:
            reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, name
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = reflection_pb2.ServerReflectionRequest(list_services="")
        (reply,) = list(stub.ServerReflectionInfo(iter([ask]), timeout=30))
    assert set(names) <= {s.name for s in reply.list_services_response.service}
    for name, want in (("many.iris.Flowers", [10.0]), ("many.wine.Wine", [2.5])):
        with tensorwire.SyncClient(f"grpc://{server.grpc_target}", service=name) as client:
            assert client.predict(x=X).tolist() == want


def test_every_api_is_a_v2_model_named_under_its_prefix(server: t.Any) -> None:
    http, grpc_ = http_client(server), grpc_client(server)
    names = [m["name"] for m in http.get_model_repository_index()]
    assert names == ["iris.predict", "iris.species", "wine.predict", "generation_of", "wait",
                     "row_sums", "shout"]
    for client, module in ((http, th), (grpc_, tg)):
        x = module.InferInput("x", [1, 4], "FP32")
        x.set_data_from_numpy(X)
        assert client.infer("iris.predict", [x]).as_numpy("result").tolist() == [10.0]
        assert client.infer("wine.predict", [x]).as_numpy("result").tolist() == [2.5]
        assert client.is_model_ready("wine.predict")
    config = http.get_model_config("row_sums")
    assert config["max_batch_size"] == 8 and config["name"] == "row_sums"
    assert http.get_model_metadata("iris.predict")["name"] == "iris.predict"


def test_the_contract_documents_describe_every_service(server: t.Any) -> None:
    schema = get(f"{server.http_url}/schema.json").json()
    assert [r["route"] for r in schema["routes"]] == [
        "/iris/predict", "/iris/species", "/wine/predict", "/generation_of", "/wait",
        "/row_sums", "/shout"]
    own = get(f"{server.http_url}/iris/schema.json").json()
    assert own["name"] == "Flowers" and [r["route"] for r in own["routes"]] == [
        "/predict", "/species"]
    assert get(f"{server.http_url}/iris/readyz").status == 200
    doc = get(f"{server.http_url}/docs.json").json()
    ops = {path: item["post"] for path, item in doc["paths"].items() if "post" in item}
    assert ops["/iris/predict"]["operationId"] == "iris.predict"
    assert ops["/wine/predict"]["operationId"] == "wine.predict"
    assert ops["/iris/predict"]["tags"] == ["Flowers"] and ops["/shout"]["tags"] == ["RowSums"]
    assert len({op["operationId"] for op in ops.values()}) == len(ops)


def test_metrics_are_labelled_by_model_name(server: t.Any) -> None:
    post(f"{server.http_url}/wine/predict", {"x": X.tolist()})
    text = get(f"{server.http_url}/metrics").text
    assert 'tensorwire_requests_total{api="wine.predict",protocol="http",status="200"}' in text
    stats = http_client(server).get_inference_statistics("wine.predict")
    assert stats["model_stats"][0]["inference_stats"]["success"]["count"] >= 1


# ---------------------------------------------------------------- from the command line


def test_two_services_on_the_command_line(tmp_path: Path) -> None:
    server = spawn_cli("iris=tests.support.many_services:Flowers",
                       "tests.support.many_services:RowSums")
    try:
        assert post(f"{server.http_url}/iris/species", {}).json()[0] == "setosa"
        assert post(f"{server.http_url}/shout", {"text": "a"}).text == "A"
    finally:
        server.stop()


def test_services_from_the_config_file_with_their_own_options(tmp_path: Path) -> None:
    config = tmp_path / "many.toml"
    config.write_text('[[services]]\ntarget = "tests.support.many_services:Flowers"\n'
                      'prefix = "iris"\nthreads = 2\n\n'
                      '[[services]]\ntarget = "tests.support.many_services:Wine"\n'
                      'prefix = "wine"\nrequest_timeout = 5\n')
    # no target on the command line: the config file (TENSORWIRE_CONFIG) names them
    server = spawn_cli("--log-level=info", env={"TENSORWIRE_CONFIG": str(config)})
    try:
        assert post(f"{server.http_url}/wine/predict", {"x": X.tolist()}).json() == [2.5]
        assert post(f"{server.http_url}/iris/predict", {"x": X.tolist()}).json() == [10.0]
    finally:
        server.stop()


@pytest.mark.parametrize(("targets", "said"), [
    (["tests.support.many_services:Flowers", "tests.support.many_services:Wine"],
     "HTTP route POST /predict is declared by both tests.support.many_services:Flowers"
     ".predict and tests.support.many_services:Wine.predict; give one a prefix"),
    (["tests.support.many_services:Flowers", "x=tests.support.many_services:FlowersAgain"],
     "gRPC service many.iris.Flowers is declared by both tests.support.many_services:"
     "Flowers and tests.support.many_services:FlowersAgain"),
    (["a=tests.support.many_services:Flowers", "a=tests.support.many_services:Wine"],
     "prefix 'a' is given to both"),
    (["v2=tests.support.many_services:Flowers"], "is a path the server serves itself"),
])
def test_clashes_are_refused_at_start_up_naming_both(targets: list[str], said: str) -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "tensorwire", "serve", *targets,
                          "--http-port", "0", "--grpc-port", "0"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert said in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1  # one line


def test_a_prefix_resolves_the_clash() -> None:
    server = spawn_cli("tests.support.many_services:Flowers",
                       "wine=tests.support.many_services:Wine")
    try:
        assert post(f"{server.http_url}/predict", {"x": X.tolist()}).json() == [10.0]
        assert post(f"{server.http_url}/wine/predict", {"x": X.tolist()}).json() == [2.5]
        names = [m["name"] for m in http_client(server).get_model_repository_index()]
        assert names == ["predict", "species", "wine.predict"]
    finally:
        server.stop()
