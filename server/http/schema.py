"""The contract as JSON: `/schema.json` (BentoML's client form) and OpenAPI 3.1.

Both are derived from the same pydantic models that validate requests, so the documents
can never disagree with what the server accepts.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from ..codecs.http_facet import HttpFacet
from ..codecs.jsonschema import bentoml_forms, inline_refs
from ..contract.descriptor import APISpec, ServiceSpec
from ..wire import websocket_protocol

_REF = "#/components/schemas/{model}"

ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {"type": "string", "description": "What went wrong, for humans."},
        "detail": {
            "type": "array",
            "description": "One entry per invalid input field.",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {
                    "loc": {"type": "array", "items": {"type": ["string", "integer"]}},
                    "msg": {"type": "string"},
                    "type": {"type": "string"},
                },
            },
        },
        "request_id": {"type": "string"},
    },
}


def input_schema(api: APISpec, ref_template: str = "#/$defs/{model}") -> dict[str, Any]:
    """JSON Schema of the request: the object of inputs (for a root input: its one field)."""
    schema = api.input_model.model_json_schema(ref_template=ref_template)
    schema["title"] = schema.get("title", api.input_model.__name__)
    return schema


def root_schema(api: APISpec, ref_template: str) -> dict[str, Any]:
    assert api.root_adapter is not None
    return api.root_adapter.json_schema(ref_template=ref_template)


def output_schema(api: APISpec, ref_template: str = "#/$defs/{model}",
                  mode: JsonSchemaMode = "serialization") -> dict[str, Any]:
    adapter: TypeAdapter[Any] = api.output.adapter
    return adapter.json_schema(mode=mode, ref_template=ref_template)


def schema_json(spec: ServiceSpec) -> dict[str, Any]:
    """`/schema.json`: the service in the shape BentoML's HTTP client reads."""
    routes = []
    for api in spec.apis.values():
        if api.is_root:
            # BentoML's form: a root input is described by its own value's schema (a
            # model's object, a string, a file...), flagged `root_input`.
            inp = _as_file_part(bentoml_forms(inline_refs(root_schema(api, "#/$defs/{model}"))))
            inp["root_input"] = True
            inp["root_field"] = api.root_field.name
        else:
            inp = bentoml_forms(inline_refs(input_schema(api)))
            props = inp.get("properties", {})
            for name in props:
                props[name] = _as_file_part(props[name])
        if api.stream_input is not None:  # each element is one value of this schema
            inp["is_stream"] = True
        # Validation mode, as BentoML publishes it: a file output is `type: file` (its
        # client then saves the response as a file) where serialisation says "string".
        out = bentoml_forms(inline_refs(output_schema(api, mode="validation")))
        if api.output.stream:
            out["is_stream"] = True
        out.setdefault("media_type", _output_media(api))
        routes.append({
            "name": api.name,
            "route": api.route,
            "description": api.doc,
            "batchable": api.batchable,
            "input": inp,
            "output": out,
            "is_task": False,
        })
    return {"name": spec.name, "type": "service", "routes": routes, "description": spec.doc}


def _as_file_part(schema: dict[str, Any]) -> dict[str, Any]:
    """A top-level `bytes` input is announced as a file (`type: file`), as BentoML does.

    The server reads such a field from a multipart file part (or a raw body) as well as
    from base64 JSON; announcing it as a file lets BentoML's client, which cannot
    JSON-encode bytes, send it, and lets tensorwire's client skip the base64 detour.
    Its `format` is "bytes" (a file's is "binary" or a media class), so that a client
    can tell it is `bytes`, as the gRPC contract's `bytes` field says.
    """
    if schema.get("type") == "string" and schema.get("format") in ("base64url", "base64"):
        return {**schema, "type": "file", "format": "bytes"}
    return schema


def _output_media(api: APISpec) -> str:
    if api.output.stream:
        return "text/event-stream"
    return api.output.codec.http.output_media


def openapi_files(node: Any) -> Any:
    """schema.json's file fields (`type: file`) as OpenAPI binary strings."""
    if isinstance(node, dict):
        if node.get("type") == "file":
            out = {k: v for k, v in node.items() if k not in ("type", "format", "content_type")}
            out.update({"type": "string", "format": "binary"})
            if node.get("content_type"):
                out["contentMediaType"] = node["content_type"]
            return out
        return {k: openapi_files(v) for k, v in node.items()}
    if isinstance(node, list):
        return [openapi_files(v) for v in node]
    return node


def _multipart_encoding(api: APISpec) -> dict[str, Any]:
    """Per-part media types: files as declared, structured fields as JSON parts."""
    encoding: dict[str, Any] = {}
    for f in api.fields:
        http = f.codec.http
        if http.is_file:
            file = http.item or http  # a list of files: each part is one item
            if file.body_media != "application/octet-stream":
                encoding[f.name] = {"contentType": file.body_media}
        elif http.body_media == "application/json":
            encoding[f.name] = {"contentType": "application/json"}
    return encoding


def _request_body(api: APISpec, schemas: dict[str, Any]) -> dict[str, Any]:
    if api.is_root:
        schema = openapi_files(_lift_defs(root_schema(api, _REF), schemas))
        http = api.root_field.codec.http
        return {"required": api.root_field.required,
                "content": {http.body_media: {"schema": schema}, **_binary(http)}}
    schema = openapi_files(_lift_defs(input_schema(api, _REF), schemas))
    required = any(f.required for f in api.fields) or bool(api.fields)
    if api.has_files:
        media: dict[str, Any] = {"schema": schema}
        encoding = _multipart_encoding(api)
        if encoding:
            media["encoding"] = encoding
        return {"required": required, "content": {"multipart/form-data": media}}
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def _lift_defs(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    return schema


def _binary(http: HttpFacet) -> dict[str, Any]:
    """Alternative binary media types of a codec (`application/x-npy` for tensors)."""
    return {m: {"schema": {"type": "string", "format": "binary"}} for m in http.binary_media}


def _element_schema(api: APISpec, schemas: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema of one element of the API's streamed input."""
    if api.is_root:
        return openapi_files(_lift_defs(root_schema(api, _REF), schemas))
    schema = openapi_files(_lift_defs(input_schema(api, _REF), schemas))
    assert api.stream_input is not None
    return schema.get("properties", {}).get(api.stream_input.name, {})


def _websocket_operation(api: APISpec, op: dict[str, Any], out: dict[str, Any],
                         schemas: dict[str, Any]) -> dict[str, Any]:
    """A streamed-input API's route: a WebSocket (OpenAPI has no word for one, so the
    upgrade is a GET and the messages are described by the `x-websocket` extension)."""
    field = api.stream_input
    assert field is not None
    http = field.codec.http
    output = api.output.codec.http
    text_media = http.body_media if http.body_media.startswith("text/") else "application/json"
    op["parameters"] = [
        {"name": "Upgrade", "in": "header", "required": True,
         "schema": {"type": "string", "enum": ["websocket"]}},
        {"name": "Sec-WebSocket-Protocol", "in": "header", "required": False,
         "description": f"offer `{websocket_protocol.SUBPROTOCOL}`; browsers, which cannot set "
                        "Authorization, may add `bearer.<token>`",
         "schema": {"type": "string"}},
    ]
    op["responses"] = {
        "101": {"description": "Switching Protocols: the WebSocket is open"},
        "426": _error_response("Not a WebSocket upgrade"),
    }
    op["x-websocket"] = {
        "subprotocol": websocket_protocol.SUBPROTOCOL,
        "receives": {
            "description": f"one message per element of `{field.name}`: a text message "
                           f"({text_media})" + (
                               f", or a binary one ({', '.join(http.binary_media)})"
                               if http.binary_media else ", or a binary one (its bytes)"),
            "schema": _element_schema(api, schemas),
        },
        "sends": {
            "description": ("one message per chunk the method yields" if api.output.stream
                            else "one message: the result") +
                           "; JSON and text as text messages, binary values as binary ones"
                           + (f" ({', '.join(output.binary_media)} when the upgrade's "
                              "Accept asks)" if output.binary_media else ""),
            "stream": api.output.stream,
            "schema": out,
        },
        "close_codes": {str(code): text for code, text in websocket_protocol.DESCRIPTIONS.items()},
    }
    return op


def _error_response(description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": _REF.format(model="Error")}}}}


#: The bearer scheme, declared when auth is on, so that Swagger UI shows Authorize.
BEARER = "bearerAuth"


@functools.cache
def openapi(spec: ServiceSpec, version: str = "0.1.0", *, auth: bool = False,
            open_health: bool = True, root_path: str = "") -> dict[str, Any]:
    """OpenAPI 3.1 document of the service (served at /docs.json).

    With `auth`, every operation needs the bearer token (`security`), except the health
    probes when they stay open; with a `root_path`, the server URL is that prefix, so
    Swagger UI's calls behind a path-prefix proxy reach the server.
    """
    schemas: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, Any] = {}
    for api in spec.apis.values():
        out = _lift_defs(output_schema(api, _REF), schemas)
        if api.output.model is not None:  # a named model output: a reusable component
            name = api.output.model.__name__
            schemas.setdefault(name, out)
            out = {"$ref": _REF.format(model=name)}
        media = _output_media(api)
        summary = (api.doc or api.name).strip().splitlines()[0]
        op: dict[str, Any] = {
            "operationId": api.name,
            "summary": summary,
            "tags": [spec.name],
            "responses": {
                "200": {"description": "Successful response",
                        "content": {media: {"schema": out},
                                    **({} if api.output.stream
                                       else _binary(api.output.codec.http))}},
                "400": _error_response("Invalid input"),
                "413": _error_response("Request too large"),
                "415": _error_response("Unsupported media type"),
                "500": _error_response("Internal error"),
            },
        }
        if api.doc:
            op["description"] = api.doc
        if api.stream_input is not None:
            paths[api.route] = {"get": _websocket_operation(api, op, out, schemas)}
            continue
        if api.fields:
            op["requestBody"] = _request_body(api, schemas)
        paths[api.route] = {"post": op}
    probe = {"responses": {"200": {"description": "OK"}, "503": {"description": "Not ready"}}}
    open_probe = {"security": []} if auth and open_health else {}
    for route, what in (("/livez", "Liveness"), ("/readyz", "Readiness"), ("/healthz", "Health")):
        paths[route] = {"get": {"summary": what, "tags": ["infrastructure"], **probe,
                                **open_probe}}
    info: dict[str, Any] = {"title": spec.name, "version": version}
    if spec.doc and spec.doc.strip():
        info["description"] = spec.doc.strip()
    document: dict[str, Any] = {"openapi": "3.1.0", "info": info}
    if root_path:
        document["servers"] = [{"url": root_path}]
    components: dict[str, Any] = {"schemas": openapi_files(dict(sorted(schemas.items())))}
    if auth:
        components["securitySchemes"] = {BEARER: {
            "type": "http", "scheme": "bearer",
            "description": "The server's token (--auth-token / TENSORWIRE_AUTH_TOKEN)."}}
        document["security"] = [{BEARER: []}]
        unauthorized = _error_response("Missing or wrong bearer token")
        for item in paths.values():
            if "post" in item:
                item["post"]["responses"]["401"] = unauthorized
    document["paths"] = openapi_files(paths)
    document["components"] = components
    return document
