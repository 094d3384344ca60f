"""docker/: the Dockerfile, compose file and Kubernetes manifests (base and overlays)
agree with each other, with the server's settings and with the docs' commands; the
kustomizations build with kubectl."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from tensorwire.grpc.server import LIVENESS_SERVICE
from tensorwire.settings import Settings
from tensorwire.telemetry.metrics import DURATION
from tests.support.dockerfile import parse
from tests.support.servers import ROOT

DOCKER = ROOT / "docker"
#: Where the deployment commands are documented (the README links to it).
DEPLOYMENT_DOC = ROOT / "docs" / "guides" / "deployment.md"
K8S = DOCKER / "k8s"
BASE = K8S / "base"
GPU = K8S / "overlays" / "gpu"
LOAD = K8S / "overlays" / "load-metric"
LOAD_COMPONENT = K8S / "components" / "load-metric"
KSERVE = K8S / "kserve"
#: Seconds a stop grace period must leave after preStop + the drain: both servers close
#: (serve.CLOSE_TIMEOUT, 1 s), the runtime and the worker processes exit.
MARGIN = 5


@pytest.fixture(scope="module")
def stages():
    return parse(DOCKER / "Dockerfile")[1]


def kustomize(folder: Path) -> list[dict]:
    """`kubectl kustomize FOLDER`: offline, what `kubectl apply -k` would send."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed")
    built = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True,
                           text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    return list(yaml.safe_load_all(built.stdout))


def by_kind(docs: list[dict]) -> dict[str, dict]:
    """Documents by `Kind/name`, and by kind alone: for a kind with several documents
    (the Service and the headless one) the one named like the app, `tensorwire`."""
    out: dict[str, dict] = {}
    for doc in docs:
        kind, name = doc["kind"], doc["metadata"]["name"]
        out[f"{kind}/{name}"] = doc
        if kind not in out or name == "tensorwire":
            out[kind] = doc
    return out


def kinds(docs: list[dict]) -> set[str]:
    return {doc["kind"] for doc in docs}


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    docs = []
    for path in sorted(BASE.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs.extend(yaml.safe_load_all(path.read_text()))
    return by_kind(docs)


@pytest.fixture(scope="module")
def gpu() -> dict[str, dict]:
    return by_kind(kustomize(GPU))


def test_dockerfile_shape(stages):
    build, final = stages[0], stages[-1]
    assert len(stages) == 2 and build.name == "build"
    assert build.base == final.base == "python:3.11-slim"
    assert final.exec_form("ENTRYPOINT") == ["tensorwire", "serve", "--host", "0.0.0.0"]
    assert final.exec_form("HEALTHCHECK") == ["python", "-m", "tensorwire.ops.probe"]
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
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml")
    # `kubectl apply -k docker/k8s` applies the base as is
    assert yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"] == ["base"]


def test_compose_file_agrees(stages):
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    svc = compose["services"]["tensorwire"]
    assert (DOCKER / svc["build"]["context"] / svc["build"]["dockerfile"]).resolve() == (
        DOCKER / "Dockerfile").resolve()
    assert set(svc["build"]["args"]) <= {a for stage in stages for a in stage.args}
    # published on the loopback only: the API has no token by default
    assert svc["ports"] == ["127.0.0.1:3000:3000", "127.0.0.1:50051:50051"]


def test_kubectl_builds_every_kustomization():
    expected = {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"}
    folders = [K8S, BASE, GPU, LOAD]
    for folder in folders:
        assert kinds(kustomize(folder)) == expected, folder
    # `apply --dry-run=client` also needs an API server for discovery, so it runs only
    # when a cluster is reachable
    kubectl = shutil.which("kubectl")
    assert kubectl is not None
    reachable = subprocess.run([kubectl, "version", "--request-timeout=3s"],
                               capture_output=True, timeout=30).returncode == 0
    if reachable:
        for folder in folders:
            applied = subprocess.run([kubectl, "apply", "--dry-run=client", "-k", str(folder)],
                                     capture_output=True, text=True, timeout=60)
            assert applied.returncode == 0, applied.stderr


def pod_and_container(deployment: dict) -> tuple[dict, dict]:
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_gpu_overlay_asks_for_a_gpu_node_and_keeps_the_rest(manifests, gpu):
    pod, container = pod_and_container(gpu["Deployment"])
    assert int(container["resources"]["limits"]["nvidia.com/gpu"]) == 1
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in (
        pod["tolerations"])
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    # a CUDA build of the image, not the CPU one
    assert container["image"].split(":")[0] == "tensorwire-gpu"
    # everything else is the base: probes, drain, security, volumes, the other kinds
    base_pod, base_container = pod_and_container(manifests["Deployment"])
    for key in ("env", "ports", "startupProbe", "readinessProbe", "livenessProbe",
                "lifecycle", "securityContext", "volumeMounts"):
        assert container[key] == base_container[key], key
    for key in ("securityContext", "terminationGracePeriodSeconds", "volumes"):
        assert pod[key] == base_pod[key], key
    for kind in ("Service", "Service/tensorwire-headless", "HorizontalPodAutoscaler",
                 "PodDisruptionBudget"):
        assert gpu[kind] == manifests[kind], kind


def deployments(manifests: dict[str, dict]) -> list[dict]:
    """The base Deployment, and the GPU overlay's when kubectl can build it."""
    out = [manifests["Deployment"]]
    if shutil.which("kubectl"):
        out.append(by_kind(kustomize(GPU))["Deployment"])
    return out


def test_read_only_root_keeps_home_and_tmp_writable(manifests, stages):
    """The image promises a writable HOME (library caches) and the server writes /tmp;
    with readOnlyRootFilesystem each needs a writable volume of its own."""
    home = stages[-1].env()["HOME"]
    for deployment in deployments(manifests):
        pod, container = pod_and_container(deployment)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        for path in ("/tmp", home):
            assert path in mounts, path
            assert not mounts[path].get("readOnly", False)
            assert "emptyDir" in volumes[mounts[path]["name"]], path


def drain(env: Mapping[str, str]) -> float:
    """Seconds the server drains after SIGTERM under this environment."""
    return float(env.get("TENSORWIRE_GRACEFUL_TIMEOUT", Settings().graceful_timeout))


def compose_env(svc: dict) -> dict[str, str | None]:
    env = svc.get("environment", {})
    if isinstance(env, dict):
        return {k: None if v is None else str(v) for k, v in env.items()}
    return {k: (v if sep else None) for k, sep, v in (e.partition("=") for e in env)}


def seconds(duration: str) -> float:
    """A compose duration: 40s, 1m30s, 1.5m."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|s|m|h)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, duration
    unit = {"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * unit[u] for n, u in parts)


def readme_run_commands(readme: str) -> list[list[str]]:
    """Every `docker run` / `podman run` in a page's shell blocks, as words."""
    commands = []
    for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", readme, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip().removeprefix("$ ")
            words = shlex.split(line) if line else []
            if words[:2] in (["docker", "run"], ["podman", "run"]):
                commands.append(words)
    return commands


def test_every_stop_grace_period_covers_the_drain(manifests, stages):
    """docker run --stop-timeout, compose's stop_grace_period and the pod's
    terminationGracePeriodSeconds all outlast preStop + the server's drain."""
    readme = DEPLOYMENT_DOC.read_text()
    runs = readme_run_commands(readme)
    assert runs
    image_env = stages[-1].env()
    for words in runs:
        env = dict(image_env)
        for i, word in enumerate(words):  # -e K=V, --env K=V, --env=K=V
            if word in ("-e", "--env") or word.startswith("--env="):
                value = words[i + 1] if word in ("-e", "--env") else word[len("--env="):]
                key, _, val = value.partition("=")
                env[key] = val
        timeout = [words[i + 1] for i, w in enumerate(words) if w == "--stop-timeout"] + [
            w.split("=", 1)[1] for w in words if w.startswith("--stop-timeout=")]
        assert timeout, f"no --stop-timeout (docker's 10 s default kills the drain): {words}"
        assert float(timeout[0]) >= drain(env) + MARGIN, words

    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    svc = compose["services"]["tensorwire"]
    env = {k: v for k, v in compose_env(svc).items() if v is not None}
    grace = seconds(svc["stop_grace_period"])
    assert grace >= drain(env) + MARGIN
    assert f"stop_grace_period: {svc['stop_grace_period']}" in readme

    for deployment in deployments(manifests):
        pod, container = pod_and_container(deployment)
        env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
        pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep"
        grace = pod["terminationGracePeriodSeconds"]
        assert grace >= float(pre_stop[1]) + drain(env) + MARGIN
        assert f"terminationGracePeriodSeconds: {grace}" in readme


def test_compose_passes_the_token_through_without_interpolation():
    text = (DOCKER / "compose.yaml").read_text()
    # implementations disagree on `${VAR:-}`: one passed it to the container literally,
    # turning auth on with a token readable in the repository
    assert "${" not in "".join(line.split("#")[0] for line in text.splitlines())
    svc = yaml.safe_load(text)["services"]["tensorwire"]
    env = compose_env(svc)
    # a bare name: the host's value when set, else unset (and auth off)
    assert env["TENSORWIRE_AUTH_TOKEN"] is None


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
    readme = DEPLOYMENT_DOC.read_text()
    docker = readme[readme.index("## Docker"):readme.index("## Compose")]
    for name in {a for stage in stages for a in stage.args} | set(parse(DOCKER / "Dockerfile")[0]):
        assert f"`{name}`" in docker, name
    assert "https://download.pytorch.org/whl/cpu" in docker


def test_headless_service_lists_every_pod_for_grpc_balancing(manifests):
    """A headless Service (no cluster IP: one DNS record per ready pod) beside the plain
    one, on the same pods' gRPC port, for clients that balance calls themselves."""
    plain, headless = manifests["Service"], manifests["Service/tensorwire-headless"]
    assert headless["spec"]["clusterIP"] == "None"
    assert "clusterIP" not in plain["spec"]
    assert headless["spec"]["selector"] == plain["spec"]["selector"]
    (port,) = headless["spec"]["ports"]
    assert (port["name"], port["port"], port["targetPort"]) == ("grpc", 50051, "grpc")
    assert port["appProtocol"] == "kubernetes.io/h2c"
    # not-ready (draining) pods leave the DNS answer
    assert not headless["spec"].get("publishNotReadyAddresses", False)
    readme = (ROOT / "docs" / "guides" / "scaling.md").read_text()
    assert "dns:///tensorwire-headless." in readme


def test_load_metric_hpa_reads_what_the_server_exports(manifests):
    """overlays/load-metric: the HPA scales on requests in flight per pod (and CPU);
    the Prometheus adapter's rule makes that metric from a series /metrics exports."""
    hpa = by_kind(kustomize(LOAD))["HorizontalPodAutoscaler"]
    metrics = {m["type"]: m for m in hpa["spec"]["metrics"]}
    assert set(metrics) == {"Pods", "Resource"}
    assert metrics["Resource"] == manifests["HorizontalPodAutoscaler"]["spec"]["metrics"][0]
    pods = metrics["Pods"]["pods"]
    assert pods["target"]["type"] == "AverageValue"
    values = yaml.safe_load((LOAD_COMPONENT / "prometheus-adapter.values.yaml").read_text())
    (rule,) = values["rules"]["custom"]
    assert rule["name"]["as"] == pods["metric"]["name"]
    series = f"{DURATION._name}_sum"  # a Histogram's running total of seconds
    assert rule["seriesQuery"].startswith(series + "{")
    assert rule["name"]["matches"] == f"^{series}$"
    assert "rate(<<.Series>>" in rule["metricsQuery"]
    assert rule["resources"]["overrides"]["pod"] == {"resource": "pod"}
    # everything but the HPA is the base
    load = by_kind(kustomize(LOAD))
    for key in ("Deployment", "Service", "Service/tensorwire-headless",
                "PodDisruptionBudget"):
        assert load[key] == manifests[key], key
