"""What the HTTP app says of its services: `/schema.json`, `/docs.json`, readiness.

One service is described as it always was. Several are merged, each keeping its own
part: `/schema.json` lists every loaded service's routes (at their full paths, under
their prefixes), `/<prefix>/schema.json` one prefixed service's routes relative to its
prefix (so `tensorwire.SyncClient("http://host:3000/<prefix>")` and BentoML's client
see that service alone), and `/docs.json` is one OpenAPI document whose operations are
tagged by service, with a prefixed service's operation ids and component names made
unique (`iris.predict`). The documents follow model control: an unloaded service leaves
them, a loaded one joins them; each is made once per set of loaded services.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ..runtime.hosted import Hosted
from ..settings import Settings
from .schema import openapi, schema_json

_REF = "#/components/schemas/"


class Catalog:
    """The documents of a server's services, made for what is loaded now."""

    def __init__(self, services: Sequence[Hosted], settings: Settings) -> None:
        self.services = list(services)
        self.settings = settings
        self._made: dict[tuple[str, tuple[bool, ...]], bytes] = {}

    def loaded(self) -> list[Hosted]:
        """The services serving now (a lone service is described whatever its state)."""
        if len(self.services) == 1:
            return self.services
        return [s for s in self.services if s.ready]

    def _cached(self, key: str, make: Callable[[], Any]) -> bytes:
        state = tuple(s.ready for s in self.services)
        body = self._made.get((key, state))
        if body is None:
            body = self._made[(key, state)] = orjson.dumps(make())
        return body

    # ------------------------------------------------------------------ documents
    def schema(self) -> bytes:
        """`/schema.json`: the service, or every loaded one's routes merged."""
        return self._cached("schema", lambda: merged_schema(self.loaded()))

    def service_schema(self, service: Hosted) -> bytes:
        """`/<prefix>/schema.json`: one service, its routes relative to its prefix."""
        return self._cached(f"schema:{service.prefix}",
                            lambda: schema_json(service.declared))

    def openapi(self) -> bytes:
        """`/docs.json`: one OpenAPI document of every loaded service."""
        s = self.settings
        return self._cached("openapi", lambda: merged_openapi(
            self.loaded(), auth=bool(s.auth_token), open_health=s.auth_open_health,
            root_path=s.root_path))

    @property
    def title(self) -> str:
        return " + ".join(s.name for s in self.services)


def merged_schema(services: Sequence[Hosted]) -> dict[str, Any]:
    """One `schema.json` of `services` (the one service's own when it is alone)."""
    if len(services) == 1:
        return schema_json(services[0].spec)
    docs = [schema_json(s.spec) for s in services]
    description = "\n\n".join(d["description"] for d in docs if d.get("description"))
    return {"name": " + ".join(d["name"] for d in docs), "type": "service",
            "routes": [route for d in docs for route in d["routes"]],
            "description": description or None}


def merged_openapi(services: Sequence[Hosted], **options: Any) -> dict[str, Any]:
    """One OpenAPI document of `services` (the one service's own when it is alone, with
    no prefix): paths merged, each operation tagged by its service."""
    if len(services) == 1 and not services[0].prefix:
        return openapi(services[0].spec, **options)
    document: dict[str, Any] | None = None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for service in services:
        doc = copy.deepcopy(openapi(service.spec, **options))
        renames = {}
        for name, schema in doc["components"]["schemas"].items():
            if name in schemas and schemas[name] != schema:
                renames[name] = f"{service.prefix or service.name}.{name}"
        if renames:
            doc = _renamed(doc, renames)
        schemas.update(doc["components"]["schemas"])
        for path, item in doc["paths"].items():
            post = item.get("post")
            if post is not None and service.prefix:
                post["operationId"] = service.public(post["operationId"])
            paths.setdefault(path, item)
        if document is None:
            document = doc
    assert document is not None, "no service to describe"
    document["info"]["title"] = " + ".join(s.name for s in services)
    document["info"].pop("description", None)
    document["paths"] = paths
    document["components"]["schemas"] = dict(sorted(schemas.items()))
    return document


def _renamed(doc: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """`doc` with the components in `renames` (and every reference to them) renamed."""
    text = orjson.dumps(doc).decode()
    for old, new in renames.items():
        text = text.replace(f'"{_REF}{old}"', f'"{_REF}{new}"')
    out = orjson.loads(text)
    out["components"]["schemas"] = {renames.get(k, k): v for k, v in
                                    out["components"]["schemas"].items()}
    return out
