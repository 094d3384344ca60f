"""The Grafana dashboard asks only for metrics the server exports: a real server's
/metrics, after calls that fill every family, against every PromQL query of
docker/grafana/dashboards/tensorwire.json."""

from __future__ import annotations

import json
import re

from prometheus_client.parser import text_string_to_metric_families

import tensorwire
from tests.support.http_calls import get, post
from tests.support.servers import ROOT, serving

DASHBOARD = ROOT / "docker" / "grafana" / "dashboards" / "tensorwire.json"
#: PromQL's functions, aggregations and keywords that the queries use (not metric names).
PROMQL_WORDS = {
    "sum", "avg", "min", "max", "count", "rate", "irate", "increase", "histogram_quantile",
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "clamp_min", "clamp_max", "label_values", "offset", "bool", "topk", "bottomk", "abs",
}


@tensorwire.service
class Watched:
    @tensorwire.api
    def echo(self, text: str) -> str:
        return text

    @tensorwire.api(batchable=True, max_batch_size=8)
    def double(self, xs: list[float]) -> list[float]:
        return [2 * x for x in xs]


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    out = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    out += [v["query"]["query"] for v in dashboard["templating"]["list"]]
    return out


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL query reads: its identifiers once label matchers,
    grouping labels, ranges, strings and Grafana's variables are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", query)  # strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges
    text = re.sub(r"\$\w+", "", text)  # $__rate_interval, $api
    if text.strip().startswith("label_values("):  # label_values(metric, label)
        text = text.rsplit(",", 1)[0]
    words = set(re.findall(r"[A-Za-z_:][\w:]*", text))
    return words - PROMQL_WORDS


def exported(text: str) -> tuple[set[str], dict[str, set[str]]]:
    """Sample names of a /metrics page, and each label's values."""
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names.add(sample.name)
            for key, value in sample.labels.items():
                labels.setdefault(key, set()).add(value)
    return names, labels


def test_every_query_names_a_metric_the_server_exports():
    with serving(Watched) as server, tensorwire.SyncClient(
            f"grpc://{server.grpc_target}") as grpc_client:
        assert post(server.http_url + "/echo", {"text": "hi"}).status == 200
        assert post(server.http_url + "/echo", {"txt": "typo"}).status == 400
        assert post(server.http_url + "/double", {"xs": [1.0, 2.0]}).status == 200
        assert grpc_client.echo(text="hi") == "hi"
        page = get(server.http_url + "/metrics").text
    names, labels = exported(page)
    found = {q: metric_names(q) for q in queries()}
    assert all(found.values()), [q for q, n in found.items() if not n]
    missing = {q: n - names for q, n in found.items() if n - names}
    assert not missing, f"the dashboard reads metrics /metrics does not have: {missing}"
    # the label values the queries filter on are the ones the server writes
    assert {"http", "grpc"} <= labels["protocol"]
    assert {"200", "400", "OK"} <= labels["status"]  # HTTP codes, gRPC names
    assert "le" in labels  # histograms: what histogram_quantile reads


def test_the_query_reader_finds_metric_names():
    q = ('sum by (api) (rate(tensorwire_batch_size_sum{api=~"$api"}[$__rate_interval])) / '
         'sum by (api) (rate(tensorwire_batch_size_count{api=~"$api"}[5m]))')
    assert metric_names(q) == {"tensorwire_batch_size_sum", "tensorwire_batch_size_count"}
    assert metric_names("label_values(tensorwire_requests_total, api)") == {
        "tensorwire_requests_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(x_bucket[1m])))") == {
        "x_bucket"}
