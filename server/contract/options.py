"""BentoML's `@service(...)` options, read once: each one maps to a tensorwire setting or
is reported as ignored, never silently dropped.

`@tensorwire.service(traffic={"timeout": 30, "max_concurrency": 8}, workers=2)` is how a
BentoML service declares its runtime; code moving over keeps those lines, so they must
mean what they meant there. `read_service_options` turns the free-form options
(`ServiceSpec.config`) into

- `settings`: values for `tensorwire.settings.Settings` fields. They sit under every
  explicit source: defaults < @service options < config file < env < flags, so an
  operator's `--request-timeout` still wins over the code's `traffic.timeout`;
- `ignored`: (option, why) for each option tensorwire does not apply, which start-up
  logs as one warning each.

A value of the wrong type is a `ContractError` when the class is decorated, naming the
class and the option, like every other definition-time mistake.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .signature import ContractError


@dataclass(frozen=True)
class ServiceOptions:
    """What a service's `@service(...)` options amount to."""

    #: Settings field name -> value.
    settings: dict[str, Any] = field(default_factory=dict)
    #: (option path, e.g. "traffic.concurrency", why it is not applied).
    ignored: list[tuple[str, str]] = field(default_factory=list)


# ------------------------------------------------------------------ value checks
def _positive_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError("expected a positive number of seconds")
    return float(value)


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("expected a positive integer")
    return value


def _port(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ValueError("expected a port number 0..65535")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("expected a non-empty string")
    return value


def _host(value: Any) -> str:
    return _text(str(value))  # BentoML accepts ip_address objects too


def _workers(value: Any) -> int:
    if value == "cpu_count":
        return os.cpu_count() or 1
    try:
        return _positive_int(value)
    except ValueError:
        raise ValueError('expected a positive integer or "cpu_count"') from None


def _origins(value: Any) -> list[str]:
    if isinstance(value, str):
        return [o.strip() for o in value.split(",") if o.strip()]
    if isinstance(value, list | tuple) and all(isinstance(o, str) for o in value):
        return list(value)
    raise ValueError("expected an origin, a comma-separated string or a list of them")


def _sample_rate(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError("expected a number from 0 to 1")
    return float(value)


#: Option path -> (Settings field, check). The table of the README's BentoML section.
MAPPED: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "traffic.timeout": ("request_timeout", _positive_float),
    "traffic.max_concurrency": ("max_concurrency", _positive_int),
    "workers": ("workers", _workers),
    "threads": ("threads", _positive_int),
    "timeouts.graceful_shutdown": ("graceful_timeout", _positive_float),
    "http.host": ("host", _host),
    "http.port": ("http_port", _port),
    "http.cors.access_control_allow_origins": ("cors_origins", _origins),
    "grpc.port": ("grpc_port", _port),
    "grpc.max_message_length": ("max_request_size", _positive_int),
    "ssl.certfile": ("tls_cert", _text),
    "ssl.keyfile": ("tls_key", _text),
    "metrics.enabled": ("metrics", _bool),
    "logging.access.enabled": ("access_log", _bool),
    "tracing.sample_rate": ("trace_sample_rate", _sample_rate),
}

#: Options read elsewhere or only steering the ones above (switches of a group).
HANDLED = frozenset({"description", "http.cors.enabled", "ssl.enabled", "grpc.host",
                     "tracing.exporter_type"})

#: Why a known BentoML option is not applied; a group's reason covers its sub-options.
IGNORED: dict[str, str] = {
    "traffic.concurrency": "a BentoCloud autoscaling target; --max-concurrency is the "
                           "hard limit",
    "traffic.external_queue": "a BentoCloud request queue; not available here",
    "resources": "a scheduling request for BentoCloud; give the container its CPU, memory "
                 "and GPUs (docker/k8s manifests)",
    "image": "BentoCloud image building; see docker/Dockerfile",
    "envs": "BentoCloud deployment variables; set them in the environment",
    "labels": "BentoCloud deployment labels",
    "backlog": "the listen backlog is the system default",
    "max_runner_connections": "tensorwire has no runners",
    "runner_probe": "tensorwire has no runners; see /livez and /readyz",
    "monitoring": "BentoML's data monitoring is not available; see /metrics",
    "metrics.namespace": "metric names are fixed (tensorwire_*)",
    "metrics.duration": "histogram buckets are fixed",
    "logging.access": "the access line's fields are fixed; see --access-log",
    "ssl": "only certfile and keyfile apply (--tls-cert, --tls-key)",
    "timeouts.keep_alive": "not configurable",
    "http.cors": "only access_control_allow_origins applies (--cors-origins)",
    "http.response": "not configurable",
    "grpc": "not configurable",
    "tracing": "the OTEL_* environment variables configure the exporter",
}


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"traffic": {"timeout": 3}} -> {"traffic.timeout": 3}; groups not in any table
    stay whole, so an unknown group is one warning, not one per key."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        known_group = any(p.startswith(path + ".") for p in (*MAPPED, *HANDLED, *IGNORED))
        if isinstance(value, Mapping) and known_group:
            out.update(_flatten(value, path + "."))
        else:
            out[path] = value
    return out


def _reason(path: str) -> str | None:
    """The IGNORED reason of `path` or of its closest group."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        reason = IGNORED.get(".".join(parts[:end]))
        if reason is not None:
            return reason
    return None


def read_service_options(config: Mapping[str, Any], where: str) -> ServiceOptions:
    """The settings and the ignored options of a service's `@service(...)` options.

    `where` names the class in errors (`ContractError` for a value of the wrong type).
    """
    flat = _flatten(config)
    options = ServiceOptions()

    def fail(path: str, exc: ValueError) -> ContractError:
        return ContractError(f"{where}: @service option {path}={flat[path]!r}: {exc}")

    switched_off = {group for group in ("ssl", "http.cors")
                    if flat.get(f"{group}.enabled") is False}
    for path, value in flat.items():
        group = next((g for g in switched_off if path.startswith(g + ".")), None)
        if path in MAPPED and group is None:
            name, check = MAPPED[path]
            try:
                options.settings[name] = check(value)
            except ValueError as exc:
                raise fail(path, exc) from None
        elif path in HANDLED or (group is not None and path in MAPPED):
            if path.endswith(".enabled") and not isinstance(value, bool):
                raise fail(path, ValueError("expected true or false"))
            if path == "description" and not isinstance(value, str):
                raise fail(path, ValueError("expected a string"))
        else:
            why = _reason(path) or "not a BentoML or tensorwire option"
            options.ignored.append((path, why))
    _tracing(flat, options, fail)
    _grpc_host(flat, options)
    if "max_request_size" in options.settings:  # gRPC's limit goes both ways in BentoML
        options.settings["max_response_size"] = options.settings["max_request_size"]
    return options


def _tracing(flat: dict[str, Any], options: ServiceOptions,
             fail: Callable[[str, ValueError], ContractError]) -> None:
    """BentoML traces when an exporter type is configured: `otlp` turns tracing on (the
    OTEL_* variables then choose where spans go); other exporters are not available."""
    exporter = flat.get("tracing.exporter_type")
    if exporter is None:
        if options.settings.get("trace_sample_rate"):
            options.settings["tracing"] = True
        return
    if exporter == "otlp":
        options.settings["tracing"] = True
    elif isinstance(exporter, str):
        options.ignored.append(("tracing.exporter_type", f"{exporter!r} is not available; "
                                "tensorwire exports OTLP (OTEL_TRACES_EXPORTER)"))
    else:
        raise fail("tracing.exporter_type", ValueError("expected an exporter name"))


def _grpc_host(flat: dict[str, Any], options: ServiceOptions) -> None:
    """One host serves both protocols: grpc.host applies when http.host is not given."""
    host = flat.get("grpc.host")
    if host is None:
        return
    if "host" not in options.settings:
        options.settings["host"] = _host(host)
    elif str(host) != options.settings["host"]:
        options.ignored.append(("grpc.host", "both protocols listen on http.host "
                                f"({options.settings['host']})"))
