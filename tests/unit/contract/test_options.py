"""BentoML's @service options: each maps to a setting or is reported as ignored."""

from __future__ import annotations

import os

import pytest

import tensorwire
from tensorwire.contract.options import read_service_options
from tensorwire.ops.sources import load_settings


def test_bentoml_traffic_workers_and_friends_map_to_settings():
    options = read_service_options({
        "traffic": {"timeout": 30, "max_concurrency": 8},
        "workers": 2, "threads": 4,
        "http": {"host": "0.0.0.0", "port": 8080,
                 "cors": {"enabled": True, "access_control_allow_origins": ["https://a"]}},
        "grpc": {"port": 9090, "max_message_length": 1024},
        "ssl": {"enabled": True, "certfile": "c.pem", "keyfile": "k.pem"},
        "timeouts": {"graceful_shutdown": 5},
        "metrics": {"enabled": False},
        "logging": {"access": {"enabled": True}},
        "tracing": {"exporter_type": "otlp", "sample_rate": 0.25},
    }, "Svc")
    assert options.settings == {
        "request_timeout": 30.0, "max_concurrency": 8, "workers": 2, "threads": 4,
        "host": "0.0.0.0", "http_port": 8080, "cors_origins": ["https://a"],
        "grpc_port": 9090, "max_request_size": 1024, "max_response_size": 1024,
        "tls_cert": "c.pem", "tls_key": "k.pem", "graceful_timeout": 5.0, "metrics": False,
        "access_log": True, "tracing": True, "trace_sample_rate": 0.25}
    assert options.ignored == []


def test_options_tensorwire_does_not_apply_are_named_once_each():
    options = read_service_options({
        "traffic": {"timeout": 1, "concurrency": 4, "external_queue": True},
        "resources": {"cpu": "2", "gpu": 1},
        "metrics": {"namespace": "x"},
        "runner_probe": {"enabled": True},
        "tracing": {"exporter_type": "zipkin"},
        "frobnicate": 1,
    }, "Svc")
    ignored = dict(options.ignored)
    assert list(ignored) == ["traffic.concurrency", "traffic.external_queue", "resources",
                             "metrics.namespace", "runner_probe", "frobnicate",
                             "tracing.exporter_type"]
    assert "autoscaling" in ignored["traffic.concurrency"]
    assert "not a BentoML or tensorwire option" in ignored["frobnicate"]
    assert "zipkin" in ignored["tracing.exporter_type"]
    assert options.settings == {"request_timeout": 1.0}


def test_switched_off_groups_and_cpu_count():
    options = read_service_options({
        "ssl": {"enabled": False, "certfile": "c.pem"},
        "http": {"cors": {"enabled": False, "access_control_allow_origins": "*"}},
        "workers": "cpu_count"}, "Svc")
    assert options.settings == {"workers": os.cpu_count()}
    assert options.ignored == []


@pytest.mark.parametrize(("config", "fragment"), [
    ({"traffic": {"timeout": "soon"}}, "traffic.timeout='soon': expected a positive number"),
    ({"workers": 0}, 'workers=0: expected a positive integer or "cpu_count"'),
    ({"http": {"port": 70000}}, "http.port=70000"),
    ({"metrics": {"enabled": "yes"}}, "metrics.enabled='yes': expected true or false"),
    ({"tracing": {"sample_rate": 2}}, "tracing.sample_rate=2"),
])
def test_a_wrong_value_fails_at_class_definition(config, fragment):
    with pytest.raises(TypeError) as err:
        @tensorwire.service(**config)
        class Svc:
            @tensorwire.api
            def m(self) -> int:
                return 1
    assert str(err.value).startswith("test_a_wrong_value_fails_at_class_definition.<locals>"
                                      ".Svc: @service option ")
    assert fragment in str(err.value)


def test_explicit_settings_win_over_service_options():
    service = {"request_timeout": 30.0, "workers": 2, "max_concurrency": 8}
    settings = load_settings({"workers": 1}, env={"TENSORWIRE_REQUEST_TIMEOUT": "5"},
                             service=service)
    assert (settings.request_timeout, settings.workers, settings.max_concurrency) == (
        5.0, 1, 8)


def test_description_is_the_service_doc_when_the_class_has_none():
    @tensorwire.service(description="Scores reviews.")
    class Plain:
        @tensorwire.api
        def m(self) -> int:
            return 1

    assert tensorwire.get_service_spec(Plain).doc == "Scores reviews."
