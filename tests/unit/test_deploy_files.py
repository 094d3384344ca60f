"""docker/: the Dockerfile, compose file and Kubernetes manifests agree with each other
and with what the container smoke test runs; the manifests parse with kubectl."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib

import pytest
import yaml

from tensorwire.grpc.server import LIVENESS_SERVICE
from tensorwire.settings import Settings
from tests.support.dockerfile import parse
from tests.support.servers import ROOT

DOCKER = ROOT / "docker"
K8S = DOCKER / "k8s"


@pytest.fixture(scope="module")
def stages():
    return parse(DOCKER / "Dockerfile")[1]


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    docs = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def test_dockerfile_shape(stages):
    build, final = stages[0], stages[-1]
    assert len(stages) == 2 and build.name == "build"
    assert build.base == final.base == "python:3.11-slim"
    assert final.exec_form("ENTRYPOINT") == ["tensorwire", "serve", "--host", "0.0.0.0"]
    assert final.exec_form("HEALTHCHECK") == ["python", "-m", "tensorwire.probe"]
    assert final.one("EXPOSE").split() == ["3000", "50051"]
    user = final.one("USER").split(":")[0]
    assert user.isdigit() and int(user) != 0
    assert {"EXTRAS", "TORCH_INDEX_URL"} <= set(build.args)
    assert {"SERVICE", "SERVICE_DIR"} <= set(final.args)
    env = final.env()
    assert env["TENSORWIRE_SERVICE"] == final.args["SERVICE"]
    assert (env["TENSORWIRE_HTTP_PORT"], env["TENSORWIRE_GRPC_PORT"]) == ("3000", "50051")
    assert (int(env["TENSORWIRE_HTTP_PORT"]), int(env["TENSORWIRE_GRPC_PORT"])) == (
        Settings().http_port, Settings().grpc_port)
    assert any("${EXTRAS:+[${EXTRAS}]}" in run for run in build.all("RUN"))
    assert (ROOT / final.args["SERVICE_DIR"]).is_dir()
    # the non-root user gets a home of its own to write to (library caches under ~)
    assert env["HOME"].startswith("/home/")
    assert any(f"--create-home --home-dir {env['HOME']}" in run for run in final.all("RUN"))


def test_build_stage_copies_every_package_folder(stages):
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = {d.split("/")[0] for d in pyproject["tool"]["setuptools"]["package-dir"].values()}
    copied = {name for sources, _ in stages[0].copies() for name in sources}
    assert folders | {"pyproject.toml", pyproject["project"]["readme"]} <= copied
    for name in copied:
        assert (ROOT / name).exists(), name


def test_kubernetes_manifests_agree(manifests, stages):
    deployment, service, hpa = (manifests["Deployment"], manifests["Service"],
                                manifests["HorizontalPodAutoscaler"])
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": 3000, "grpc": 50051}
    assert [str(p) for p in ports.values()] == stages[-1].one("EXPOSE").split()
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    # liveness asks the health entry that stays SERVING through a drain ("" flips)
    assert container["livenessProbe"]["grpc"] == {"port": 50051, "service": LIVENESS_SERVICE}
    assert container["startupProbe"]["httpGet"]["path"] == "/livez"
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(stages[-1].one("USER").split(":")[0])
    env = {e["name"]: e for e in container["env"]}
    grace = float(env["TENSORWIRE_GRACEFUL_TIMEOUT"]["value"])
    assert pod["terminationGracePeriodSeconds"] > grace + 5  # preStop sleep + drain
    assert env["TENSORWIRE_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    if annotations.get("prometheus.io/scrape") == "true":  # scraped without the token
        assert env["TENSORWIRE_AUTH_OPEN_METRICS"]["value"] == "true"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector
    assert {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == {
        "http": (3000, "http"), "grpc": (50051, "grpc")}
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": deployment["metadata"]["name"]}
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def test_compose_file_agrees(stages):
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    (svc,) = compose["services"].values()
    assert (DOCKER / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == (
        DOCKER / "Dockerfile").resolve()
    assert set(svc["build"]["args"]) <= {a for stage in stages for a in stage.args}
    assert svc["ports"] == ["3000:3000", "50051:50051"]
    assert int(svc["stop_grace_period"].rstrip("s")) > float(
        svc["environment"]["TENSORWIRE_GRACEFUL_TIMEOUT"])


def test_kubectl_parses_the_manifests():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    # `kustomize` parses every resource offline; `apply --dry-run=client` also needs an
    # API server for discovery, so it runs only when a cluster is reachable.
    built = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True,
                           timeout=60)
    assert built.returncode == 0, built.stderr
    kinds = {d["kind"] for d in yaml.safe_load_all(built.stdout)}
    assert kinds == {"Deployment", "Service", "HorizontalPodAutoscaler",
                     "PodDisruptionBudget"}
    reachable = subprocess.run([kubectl, "version", "--request-timeout=3s"],
                               capture_output=True, timeout=30).returncode == 0
    if reachable:
        applied = subprocess.run([kubectl, "apply", "--dry-run=client", "-k", str(K8S)],
                                 capture_output=True, text=True, timeout=60)
        assert applied.returncode == 0, applied.stderr


def test_dockerfile_builds_without_a_registry_and_ships_no_wheel(stages):
    text = (DOCKER / "Dockerfile").read_text()
    # a `# syntax=` parser directive makes BuildKit pull its frontend from a registry
    assert not re.search(r"^#\s*syntax\s*=", text, re.MULTILINE | re.IGNORECASE)
    build, final = stages[0], stages[-1]
    (wheel_run,) = [run for run in build.all("RUN") if "python -m build" in run]
    wheels = wheel_run.split("--outdir")[1].split()[0]
    # the wheel is installed in the build stage; the final stage takes the environment
    (install,) = [run for run in build.all("RUN") if "${EXTRAS:+[${EXTRAS}]}" in run]
    assert f"{wheels}/" in install
    venv = final.env()["PATH"].split(":")[0].removesuffix("/bin")
    assert f"python -m venv {venv}" in install
    assert f"{venv}/bin/pip install" in install
    from_build = [rest.split()[1:] for rest in final.all("COPY") if "--from=build" in rest]
    assert from_build == [[venv, venv]]
    for rest in final.all("COPY") + final.all("RUN") + final.all("ADD"):
        assert wheels not in rest and ".whl" not in rest, rest
    # torch's CPU wheels: an optional extra index for every pip install of extras or of
    # a service's requirements (PyPI's Linux torch is the multi-GB CUDA build)
    for stage in (build, final):
        assert stage.args["TORCH_INDEX_URL"] == ""
    pip_installs = [run for stage in (build, final) for run in stage.all("RUN")
                    if "pip install" in run and ("EXTRAS" in run or "requirements" in run)]
    assert len(pip_installs) == 2
    for run in pip_installs:
        assert '${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"}' in run, run


def test_readme_documents_every_build_arg(stages):
    readme = (ROOT / "README.md").read_text()
    docker = readme[readme.index("### Docker"):readme.index("### Compose")]
    for name in {a for stage in stages for a in stage.args} | set(parse(DOCKER / "Dockerfile")[0]):
        assert f"`{name}`" in docker, name
    assert "https://download.pytorch.org/whl/cpu" in docker
