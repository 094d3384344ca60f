"""docker/k8s/kserve: the ServingRuntime and InferenceService in both of KServe's modes.

Serverless (Knative, KServe's default, `docker/k8s/kserve`): KServe copies the runtime's
container and the predictor's pod fields into a Knative Service, whose webhook refuses
every field its field mask does not let through: the manifests must carry none of them.
RawDeployment (`docker/k8s/kserve/raw`): a plain Deployment, where the drain's preStop
and grace period are allowed and needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from tensorwire.ops.sources import options
from tensorwire.security.bearer import HEALTH_PATHS
from tensorwire.settings import Settings
from tests.support.dockerfile import parse
from tests.support.servers import ROOT
from tests.unit.docker.test_deploy_files import DOCKER, KSERVE, MARGIN, by_kind, drain, kustomize

RAW = KSERVE / "raw"

# Knative's field mask (knative/serving pkg/apis/serving/fieldmask.go), written out: the
# fields of a container and of a pod spec that a Knative Service refuses, always or
# unless a feature flag that is off by default (config-features) is turned on.
KNATIVE_CONTAINER_FIELDS = {  # ContainerMask: the fields it keeps
    "name", "args", "command", "env", "workingDir", "envFrom", "image", "imagePullPolicy",
    "livenessProbe", "ports", "readinessProbe", "resources", "securityContext",
    "startupProbe", "terminationMessagePath", "terminationMessagePolicy", "volumeMounts",
}
KNATIVE_REJECTED_CONTAINER_FIELDS = {  # ContainerMask: "Disallowed fields"
    "lifecycle", "stdin", "stdinOnce", "tty", "volumeDevices",
}
KNATIVE_REJECTED_POD_FIELDS = {
    # PodSpecMask: "Disallowed fields", always
    "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds", "nodeName",
    "hostname", "subdomain", "priority", "readinessGates",
    # PodSpecMask: behind kubernetes.podspec-* feature flags, all off by default
    "affinity", "topologySpreadConstraints", "hostAliases", "nodeSelector",
    "runtimeClassName", "tolerations", "securityContext", "shareProcessNamespace",
    "priorityClassName", "schedulerName", "initContainers", "dnsPolicy", "dnsConfig",
    "hostIPC", "hostPID", "hostNetwork",
}
KNATIVE_REJECTED_SECURITY_CONTEXT_FIELDS = {"seLinuxOptions", "procMount"}
#: VolumeSourceMask: secret, configMap and projected, and emptyDir (its flag is on by
#: default); every other source is behind a flag that is off.
KNATIVE_VOLUME_SOURCES = {"secret", "configMap", "projected", "emptyDir"}
#: k8s_validation.go: queue-proxy's ports, the names Knative negotiates with, its env.
KNATIVE_RESERVED_PORTS = {8008, 8012, 8013, 8022, 9090, 9091}
KNATIVE_PORT_NAMES = {None, "", "h2c", "http1"}
KNATIVE_RESERVED_ENV = {"PORT", "K_SERVICE", "K_CONFIGURATION", "K_REVISION"}
#: KServe's ComponentExtensionSpec and PredictorSpec keys that are not pod fields.
KSERVE_PREDICTOR_KEYS = {"model", "timeout", "minReplicas", "maxReplicas", "scaleTarget",
                         "scaleMetric", "containerConcurrency", "canaryTrafficPercent",
                         "logger", "batcher", "labels", "annotations"}


@pytest.fixture(scope="module")
def stages():
    return parse(DOCKER / "Dockerfile")[1]


def documentation() -> str:
    """The README and the docs site, where the deployment commands are explained."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return "\n".join(p.read_text() for p in pages if p.is_file())


def variant(folder: Path) -> tuple[dict, dict]:
    built = by_kind(kustomize(folder))
    assert {k for k in built if "/" not in k} == {"ServingRuntime", "InferenceService"}
    return built["ServingRuntime"], built["InferenceService"]


def plain_env(container: Mapping) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container["env"]}


def request_timeout(env: Mapping[str, str | None]) -> float:
    return float(env.get("TENSORWIRE_REQUEST_TIMEOUT") or Settings().request_timeout)


@pytest.mark.parametrize("folder", [KSERVE, RAW], ids=["serverless", "raw"])
def test_kserve_runtime_and_inference_service_agree(stages, folder):
    """A v2 ServingRuntime of the same image, KServe's conventions set by environment
    variables, and an InferenceService that selects it; in both modes."""
    runtime, isvc = variant(folder)
    spec = runtime["spec"]
    assert {"v2", "grpc-v2"} <= set(spec["protocolVersions"])
    (container,) = spec["containers"]
    assert container["name"] == "kserve-container"
    assert container["image"].split(":")[0] == "tensorwire"  # the image, not a fork
    assert "command" not in container and "args" not in container  # its own entrypoint
    env = plain_env(container)
    known = {o.env for o in options()}
    assert set(env) <= known, set(env) - known
    http, grpc_port = int(env["TENSORWIRE_HTTP_PORT"]), int(env["TENSORWIRE_GRPC_PORT"])
    assert (http, grpc_port) == (8080, 9000)  # KServe's ports for v2 runtimes
    assert [p["containerPort"] for p in container["ports"]] == [http]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert get["port"] == http and get["path"].startswith("/v2/health/"), probe
        assert get["path"] in HEALTH_PATHS, probe  # open to probes under auth
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert spec["annotations"]["prometheus.kserve.io/port"] == str(http)
    assert env["TENSORWIRE_AUTH_OPEN_METRICS"] == "true"
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == int(stages[-1].one("USER").split(":")[0])
    assert security["readOnlyRootFilesystem"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    for path in ("/tmp", stages[-1].env()["HOME"]):
        assert "emptyDir" in volumes[mounts[path]], path
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["protocolVersion"] == "v2"
    assert model["modelFormat"]["name"] in {f["name"] for f in spec["supportedModelFormats"]}
    service = {e["name"]: e["value"] for e in model["env"]}["TENSORWIRE_SERVICE"]
    module, _, cls = service.partition(":")
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file() and cls


def test_serverless_variant_carries_nothing_knative_rejects():
    """The runtime's container went into the Knative Service with `lifecycle.preStop`,
    and the predictor with `terminationGracePeriodSeconds`: the webhook refused both
    (kserve/kserve#1546, #1723, knative/serving#16463)."""
    runtime, isvc = variant(KSERVE)
    assert "serving.kserve.io/deploymentMode" not in isvc["metadata"].get("annotations", {})
    spec = runtime["spec"]
    predictor = isvc["spec"]["predictor"]
    model_keys = {"modelFormat", "runtime", "protocolVersion", "storageUri"}
    for container in [*spec["containers"], predictor["model"]]:  # the model merges in
        fields = set(container) - model_keys
        assert not fields & KNATIVE_REJECTED_CONTAINER_FIELDS, container
        assert fields <= KNATIVE_CONTAINER_FIELDS, fields - KNATIVE_CONTAINER_FIELDS
        security = container.get("securityContext", {})
        assert not set(security) & KNATIVE_REJECTED_SECURITY_CONTEXT_FIELDS
        assert security.get("privileged") in (None, False)
        assert not set(plain_env(container)) & KNATIVE_RESERVED_ENV
    (container,) = spec["containers"]
    assert len(container["ports"]) == 1  # Knative routes one port
    (port,) = container["ports"]
    assert port.get("name") in KNATIVE_PORT_NAMES
    assert port["containerPort"] not in KNATIVE_RESERVED_PORTS
    # the pod-level fields of the runtime and of the predictor
    runtime_pod = set(spec) - {"annotations", "labels", "supportedModelFormats",
                               "protocolVersions", "containers", "volumes",
                               "imagePullSecrets", "multiModel", "disabled",
                               "builtInAdapter", "grpcEndpoint", "grpcDataEndpoint",
                               "httpDataEndpoint", "replicas", "storageHelper"}
    assert not runtime_pod & KNATIVE_REJECTED_POD_FIELDS, runtime_pod
    predictor_pod = set(predictor) - KSERVE_PREDICTOR_KEYS
    assert not predictor_pod & KNATIVE_REJECTED_POD_FIELDS, predictor_pod
    for volume in spec["volumes"]:
        (source,) = set(volume) - {"name"}
        assert source in KNATIVE_VOLUME_SOURCES, volume
    # The drain goes through queue-proxy: Knative makes `timeout` (the revision's request
    # timeout) the pod's grace period too; it covers tensorwire's own request limit, so
    # the server answers 504 before Knative cuts a call, and its drain.
    env = plain_env(container)
    assert predictor["timeout"] >= request_timeout(env) + MARGIN
    assert predictor["timeout"] >= drain(env) + MARGIN


def test_raw_variant_is_a_raw_deployment_with_the_drain_knative_forbids():
    runtime, isvc = variant(RAW)
    serverless_runtime, serverless_isvc = variant(KSERVE)
    annotations = isvc["metadata"]["annotations"]
    assert annotations["serving.kserve.io/deploymentMode"] == "RawDeployment"
    # its own names: applying it beside the Serverless variant replaces nothing
    assert runtime["metadata"]["name"] != serverless_runtime["metadata"]["name"]
    assert isvc["metadata"]["name"] != serverless_isvc["metadata"]["name"]
    (container,) = runtime["spec"]["containers"]
    env = plain_env(container)
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    predictor = isvc["spec"]["predictor"]
    assert predictor["terminationGracePeriodSeconds"] >= (
        float(pre_stop[1]) + drain(env) + MARGIN)
    assert "timeout" not in predictor  # Knative's: nothing reads it here


def test_the_docs_say_which_variant_is_which():
    docs = documentation()
    for command in ("kubectl apply -k docker/k8s/kserve ",
                    "kubectl apply -k docker/k8s/kserve/raw"):
        assert command in docs, command
    assert "RawDeployment" in docs and "Serverless" in docs
    assert "metrics-server" in docs  # both HPAs (docker/k8s and raw KServe) scale on CPU
