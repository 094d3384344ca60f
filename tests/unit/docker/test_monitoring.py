"""docker/compose.yaml beside its Prometheus and Grafana: the health check podman keeps,
loopback-only ports, and the provisioning that puts the dashboard on Grafana's page."""

from __future__ import annotations

import json
import re

import yaml

from tests.support.dockerfile import parse
from tests.support.servers import ROOT

DOCKER = ROOT / "docker"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
DASHBOARD = json.loads((DOCKER / "grafana" / "dashboards" / "tensorwire.json").read_text())


def mounts(service: str) -> dict[str, str]:
    """Container path -> host path (relative to docker/) of a service's bind mounts."""
    out = {}
    for volume in SERVICES[service].get("volumes", []):
        host, container, *_ = volume.split(":")
        out[container] = host
    return out


def test_the_compose_file_states_the_images_health_check():
    """podman builds OCI images, which drop HEALTHCHECK: compose says it itself."""
    final = parse(DOCKER / "Dockerfile")[1][-1]
    (line,) = final.all("HEALTHCHECK")
    flags = dict(re.findall(r"--([\w-]+)=(\S+)", line.split(" CMD ")[0]))
    check = SERVICES["tensorwire"]["healthcheck"]
    assert check["test"] == ["CMD", *final.exec_form("HEALTHCHECK")]
    expected = {k.replace("-", "_"): int(v) if k == "retries" else v
                for k, v in flags.items()}
    assert {k: v for k, v in check.items() if k != "test"} == expected


def test_every_published_port_is_on_the_loopback_only():
    for name, service in SERVICES.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"


def test_prometheus_scrapes_the_servers_http_port():
    config = yaml.safe_load((DOCKER / mounts("prometheus")["/etc/prometheus/prometheus.yml"]
                             ).read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    (static,) = job["static_configs"]
    assert static["targets"] == ["tensorwire:3000"]  # the compose service, its HTTP port
    # with a token set, /metrics must stay open to this scrape
    assert "TENSORWIRE_AUTH_OPEN_METRICS=true" in SERVICES["tensorwire"]["environment"]


def test_grafana_is_provisioned_with_the_data_source_and_the_dashboard():
    volumes = mounts("grafana")
    provisioning = DOCKER / volumes["/etc/grafana/provisioning"]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text()
                               )["datasources"]
    assert source["url"] == "http://prometheus:9090" and source["type"] == "prometheus"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "tensorwire.yaml").read_text()
                                 )["providers"]
    folder = provider["options"]["path"]
    assert DOCKER / volumes[folder] == DOCKER / "grafana" / "dashboards"
    home = dict(e.split("=", 1) for e in SERVICES["grafana"]["environment"])
    assert home["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == f"{folder}/tensorwire.json"
    # every panel and variable asks the provisioned data source
    used = [p["datasource"]["uid"] for p in DASHBOARD["panels"] if "datasource" in p]
    used += [t["datasource"]["uid"] for p in DASHBOARD["panels"] for t in p.get("targets", [])]
    used += [v["datasource"]["uid"] for v in DASHBOARD["templating"]["list"]]
    assert used and set(used) == {source["uid"]}


def test_the_dashboard_shows_what_operators_ask_for():
    titles = {p["title"] for p in DASHBOARD["panels"]}
    assert {"Requests per second", "Errors per second", "Latency percentiles",
            "Requests in flight", "Batch size", "Batch queue time"} <= titles
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
