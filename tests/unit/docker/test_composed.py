"""docker/k8s/composed: a pipeline and its model as two Deployments (issue 35 item 5),
each with its own HPA and PDB, the model behind a headless Service that the pipeline's
dependency URL names; built by `kubectl kustomize`."""

from __future__ import annotations

import pytest

from tensorwire.compose.placement import parse_placements
from tensorwire.ops.loader import load_service
from tensorwire.settings import Settings
from tests.unit.docker.test_deploy_files import K8S, by_kind, kustomize

COMPOSED = K8S / "composed"


@pytest.fixture(scope="module")
def built() -> dict[str, dict]:
    return by_kind(kustomize(COMPOSED))


def env_of(deployment: dict) -> list[dict]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container["env"]


def value(env: list[dict], name: str) -> str:
    return next(e["value"] for e in env if e["name"] == name)


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_each_piece_is_a_deployment_with_its_own_hpa_and_pdb(built: dict[str, dict]) -> None:
    for piece in ("model", "pipeline"):
        deployment = built[f"Deployment/{piece}-tensorwire"]
        pods = deployment["spec"]["template"]["metadata"]["labels"]
        assert pods["app.kubernetes.io/component"] == piece
        hpa = built[f"HorizontalPodAutoscaler/{piece}-tensorwire"]
        assert hpa["spec"]["scaleTargetRef"]["name"] == f"{piece}-tensorwire"
        pdb = built[f"PodDisruptionBudget/{piece}-tensorwire"]
        assert selects(pdb["spec"]["selector"]["matchLabels"], pods)
    model = built["Deployment/model-tensorwire"]["spec"]["template"]["metadata"]["labels"]
    pipeline = built["Deployment/pipeline-tensorwire"]["spec"]["template"]["metadata"]["labels"]
    for name, doc in built.items():  # no Service or PDB takes the other piece's pods
        if "/" in name and doc["kind"] in ("Service", "PodDisruptionBudget"):
            selector = doc["spec"].get("selector") or {}
            selector = selector.get("matchLabels", selector)
            assert selects(selector, model) != selects(selector, pipeline), name


def test_the_pipelines_dependency_is_the_models_headless_service(
        built: dict[str, dict]) -> None:
    env = env_of(built["Deployment/pipeline-tensorwire"])
    names = [e["name"] for e in env]
    placements = parse_placements([value(env, "TENSORWIRE_DEPENDENCIES")])
    Settings(dependencies=[value(env, "TENSORWIRE_DEPENDENCIES")]).validate()
    pipeline = load_service(value(env, "TENSORWIRE_SERVICE"))
    model = load_service(value(env_of(built["Deployment/model-tensorwire"]),
                               "TENSORWIRE_SERVICE"))
    # the name placed is the dependency the pipeline declares, served by the model's pods
    assert list(placements) == [d.name for d in pipeline.dependencies.values()] == [model.name]
    url = placements[model.name]
    headless = built["Service/model-tensorwire-headless"]
    assert headless["spec"]["clusterIP"] == "None"
    (port,) = headless["spec"]["ports"]
    assert url == (f"dns:///{headless['metadata']['name']}.$(POD_NAMESPACE)"
                   f".svc.cluster.local:{port['port']}")
    # $(POD_NAMESPACE) is expanded by the kubelet only from a variable defined before it
    namespace = env[names.index("POD_NAMESPACE")]
    assert namespace["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert names.index("POD_NAMESPACE") < names.index("TENSORWIRE_DEPENDENCIES")
    model_pods = built["Deployment/model-tensorwire"]["spec"]["template"]
    assert selects(headless["spec"]["selector"], model_pods["metadata"]["labels"])
    (container,) = model_pods["spec"]["containers"]
    assert {"name": "grpc", "containerPort": port["port"]} in container["ports"]


def test_both_read_one_auth_secret(built: dict[str, dict]) -> None:
    """The pipeline's calls carry its own token; the model takes the same one."""
    secrets = [{e["valueFrom"]["secretKeyRef"]["name"] for e in env_of(built[f"Deployment/{p}"])
                if e["name"] == "TENSORWIRE_AUTH_TOKEN"}
               for p in ("model-tensorwire", "pipeline-tensorwire")]
    assert secrets[0] == secrets[1] == {"tensorwire-auth"}
