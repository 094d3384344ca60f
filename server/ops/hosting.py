"""Several services in one server: which, under what prefix, with what options, and the
clashes refused before anything starts.

The services come from the command line (`tensorwire serve a:A b:B`, a target written
`iris=examples.iris:Iris` serves under the prefix `iris`) or from the config file's
`service` and `[[services]]` tables:

    [[services]]
    target = "examples.iris:Iris"
    prefix = "iris"              # routes /iris/..., v2 models iris.<api>
    threads = 4                  # this service's own: threads, request_timeout,
                                 # batch_queue_items
    [[services]]
    target = "examples.quickstart:Quickstart"
    load = false                 # with --model-control explicit: loaded on request

Targets on the command line replace the config file's list. Everything else (ports,
workers, limits, auth) is the server's; the first service's `@service(...)` options set
it, as with one service.

A clash is refused at start-up with one line naming both services: two identical
HTTP routes (`POST /predict`), two v2 models of one name, two gRPC services of one full
name, or one prefix given twice. A prefix resolves the first two (the routes and model
names move under it); the gRPC name is the service's code contract (`@service(
proto_package=...)`), which a deployment option does not rename.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from ..compose.placement import PlacementError
from ..compose.serving import composition_of
from ..contract.descriptor import ServiceSpec
from ..runtime.hosted import Placement
from ..settings import Settings
from .loader import load_service
from .sources import ConfigError

#: Settings a service may set for itself in its `[[services]]` table.
PER_SERVICE = ("threads", "request_timeout", "batch_queue_items")
ENTRY_KEYS = ("target", "prefix", "load", *PER_SERVICE)
_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
#: First path segments the server itself serves (a prefix must not shadow them).
RESERVED = frozenset({"v2", "docs", "docs.json", "schema.json", "metrics", "livez",
                      "readyz", "healthz"})


@dataclass(frozen=True)
class ServiceEntry:
    """One service as the operator named it."""

    target: str
    prefix: str = ""
    load: bool = True
    #: Its own values of `PER_SERVICE` settings.
    overrides: dict[str, Any] = field(default_factory=dict)

    def placement(self, settings: Settings) -> Placement:
        own = dataclasses.replace(settings, **self.overrides).validate() \
            if self.overrides else None
        return Placement(prefix=self.prefix, settings=own, load=self.load,
                         target=self.target)


def _split_target(text: str) -> tuple[str, str]:
    """(prefix, target) of `prefix=MODULE:Class` (no `=`: no prefix)."""
    head, sep, rest = text.partition("=")
    if sep and _PREFIX.fullmatch(head.strip()):
        return head.strip(), rest.strip()
    return "", text.strip()


def _entry(value: Any, where: str) -> ServiceEntry:
    if isinstance(value, str):
        value = {"target": value}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table with a target, got {value!r}")
    unknown = sorted(set(value) - set(ENTRY_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: "
                          f"{', '.join(ENTRY_KEYS)})")
    target = value.get("target")
    if not isinstance(target, str) or not target.strip():
        raise ConfigError(f"{where}: target must be MODULE:Class or file.py:Class")
    prefix, target = _split_target(target)
    prefix = value.get("prefix", prefix)
    if not isinstance(prefix, str) or (prefix and not _PREFIX.fullmatch(prefix)):
        raise ConfigError(f"{where}: prefix {prefix!r} must be letters, digits, - and _ "
                          "(it is a path segment and the first part of model names)")
    if prefix in RESERVED:
        raise ConfigError(f"{where}: prefix {prefix!r} is a path the server serves itself")
    load = value.get("load", True)
    if not isinstance(load, bool):
        raise ConfigError(f"{where}: load must be true or false")
    overrides = {k: value[k] for k in PER_SERVICE if k in value}
    try:
        dataclasses.replace(Settings(), **overrides).validate()
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return ServiceEntry(target, prefix, load, overrides)


def service_entries(settings: Settings) -> list[ServiceEntry]:
    """Every service the settings name, in order (raises ConfigError, naming the entry)."""
    out = []
    if settings.service:
        out.append(_entry(settings.service, "service"))
    for i, value in enumerate(settings.services):
        out.append(_entry(value, f"services[{i}]"))
    unloaded = next((e for e in out if not e.load), None)
    if unloaded is not None and settings.model_control != "explicit":
        raise ConfigError(f"{unloaded.target}: load = false needs --model-control explicit "
                          "(else nothing could ever load it)")
    prefixes = [e.prefix for e in out if e.prefix]
    twice = sorted({p for p in prefixes if prefixes.count(p) > 1})
    if twice:
        named = [e.target for e in out if e.prefix == twice[0]]
        raise ConfigError(f"prefix {twice[0]!r} is given to both {named[0]} and {named[1]}")
    return out


def clash(placed: list[tuple[ServiceSpec, Placement]]) -> str | None:
    """Why these services cannot share one server (None: they can)."""
    routes: dict[str, str] = {}
    models: dict[str, str] = {}
    grpc: dict[str, str] = {}
    for spec, placement in placed:
        who = placement.target or spec.name
        name = spec.grpc_service_name
        if name in grpc:
            return (f"gRPC service {name} is declared by both {grpc[name]} and {who}; "
                    "give one another proto_package in its @service(...)")
        grpc[name] = who
        for api in spec.apis.values():
            route = f"/{placement.prefix}{api.route}" if placement.prefix else api.route
            model = f"{placement.prefix}.{api.name}" if placement.prefix else api.name
            for what, seen, key in (("HTTP route POST", routes, route),
                                    ("v2 model", models, model)):
                if key in seen:
                    hint = _prefix_hint(placed, who)
                    return (f"{what} {key} is declared by both {seen[key]} and "
                            f"{who}.{api.name}; {hint}")
                seen[key] = f"{who}.{api.name}"
    return None


def _prefix_hint(placed: list[tuple[ServiceSpec, Placement]], who: str) -> str:
    for spec, placement in placed:
        if (placement.target or spec.name) == who and not placement.prefix:
            short = spec.name.lower()
            return (f"give one a prefix: prefix = \"{short}\" in its [[services]] table, or "
                    f"{short}={who} on the command line, serves its routes under "
                    f"/{short}/ and names its models {short}.<api>")
    return "give the other a prefix (or another one)"


def load_specs(entries: list[ServiceEntry]) -> list[ServiceSpec]:
    """Import every entry's service (raises as `load_service` does: LoadError,
    ImportFailure, TypeError, naming the target)."""
    return [load_service(entry.target) for entry in entries]


def placed(specs: list[ServiceSpec], entries: list[ServiceEntry], settings: Settings
           ) -> list[tuple[ServiceSpec, Placement]]:
    """Each service with its placement under the server's final `settings` (raises
    ConfigError for a clash, or for dependencies that cannot be placed as the settings
    say: `compose.placement`)."""
    out = [(spec, entry.placement(settings)) for spec, entry in zip(specs, entries,
                                                                     strict=True)]
    try:
        composition_of(specs, settings)
    except PlacementError as exc:
        raise ConfigError(str(exc)) from None
    problem = clash(out)
    if problem is not None:
        raise ConfigError(problem)
    return out


def describe(settings: Settings) -> str:
    """The services the settings name, for a log line (`a:A + iris=b:B`)."""
    named = [settings.service] if settings.service else []
    named += [str(s.get("target")) if isinstance(s, dict) else str(s)
              for s in settings.services]
    return " + ".join(named)
