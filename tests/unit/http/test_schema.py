"""schema.json and OpenAPI come from the same models that validate requests."""

from __future__ import annotations

from examples.constrained import TextGenerator
from examples.llm_stream import LanguageModel
from examples.models import ReviewAnalyzer
from tensorwire import get_service_spec
from tensorwire.http.schema import openapi, schema_json
from tests.support.stream_services import Streams


def test_openapi_carries_descriptions_examples_defaults_and_constraints():
    doc = openapi(get_service_spec(TextGenerator))
    assert doc["openapi"] == "3.1.0"
    op = doc["paths"]["/complete"]["post"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    props = schema["properties"]
    assert props["prompt"]["maxLength"] == 1000
    assert props["prompt"]["examples"] == ["Once upon a time"]
    assert props["prompt"]["description"].startswith("Text to continue")
    assert props["temperature"] == {**props["temperature"], "minimum": 0, "exclusiveMaximum": 2,
                                    "default": 1.0}
    assert props["max_tokens"]["exclusiveMinimum"] == 0
    assert props["max_tokens"]["multipleOf"] == 100
    assert schema["additionalProperties"] is False
    assert op["responses"]["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"}
    assert "/readyz" in doc["paths"] and "/livez" in doc["paths"]


def test_openapi_refs_resolve_to_components():
    doc = openapi(get_service_spec(ReviewAnalyzer))
    schemas = doc["components"]["schemas"]
    assert {"Review", "Analysis", "Sentiment", "Error"} <= set(schemas)
    text = str(doc)
    for name in ("Review", "Analysis"):
        assert f"#/components/schemas/{name}" in text
    assert "$defs" not in text


def test_root_inputs_document_their_body_media_type():
    doc = openapi(get_service_spec(ReviewAnalyzer))
    shout = doc["paths"]["/shout"]["post"]
    assert list(shout["requestBody"]["content"]) == ["text/plain"]
    assert list(shout["responses"]["200"]["content"]) == ["text/plain"]
    stats = doc["paths"]["/stats"]["post"]
    assert stats["requestBody"]["content"]["application/json"]["schema"]["type"] == "array"


def test_streams_are_event_streams():
    doc = openapi(get_service_spec(LanguageModel))
    assert list(doc["paths"]["/generate"]["post"]["responses"]["200"]["content"]) == [
        "text/event-stream"]


def test_streamed_inputs_are_marked_in_schema_json():
    """The input's schema is one element's, flagged `is_stream` (a client opens a
    WebSocket instead of POSTing it); other routes carry no flag."""
    routes = {r["name"]: r for r in schema_json(get_service_spec(Streams))["routes"]}
    running = routes["running"]["input"]
    assert running["is_stream"] is True
    assert running["properties"]["frames"]["dtype"] == "float32"
    assert routes["upper"]["input"] == {"type": "string", "root_input": True,
                                        "root_field": "words", "is_stream": True}
    assert routes["running"]["output"]["is_stream"] is True
    assert "is_stream" not in routes["total"]["output"]
    plain = schema_json(get_service_spec(ReviewAnalyzer))["routes"]
    assert not any("is_stream" in r["input"] for r in plain)


def test_openapi_documents_websocket_routes_as_an_extension():
    doc = openapi(get_service_spec(Streams))
    op = doc["paths"]["/scaled"]["get"]
    assert "post" not in doc["paths"]["/scaled"]
    assert list(op["responses"]) == ["101", "426"]
    ws = op["x-websocket"]
    assert ws["subprotocol"] == "tensorwire"
    assert ws["receives"]["schema"] == {"$ref": "#/components/schemas/Reading"}
    assert "(application/json)" in ws["receives"]["description"]
    assert ws["sends"]["stream"] is True
    assert ws["sends"]["schema"] == {"$ref": "#/components/schemas/Reading"}
    assert {"1000", "1007", "1008", "1009", "1011"} <= set(ws["close_codes"])
    running = doc["paths"]["/running"]["get"]["x-websocket"]
    assert running["receives"]["schema"]["dtype"] == "float32"
    assert "application/x-npy" in running["receives"]["description"]
    assert "application/x-npy" in running["sends"]["description"]
    words = doc["paths"]["/upper"]["get"]["x-websocket"]
    assert words["receives"]["schema"]["type"] == "string"
    assert "(text/plain)" in words["receives"]["description"]
    assert doc["paths"]["/total"]["get"]["x-websocket"]["sends"]["stream"] is False


def test_schema_json_is_in_bentoml_client_form():
    schema = schema_json(get_service_spec(ReviewAnalyzer))
    routes = {r["name"]: r for r in schema["routes"]}
    assert routes["analyze"]["route"] == "/analyze"
    analyze_input = routes["analyze"]["input"]
    assert analyze_input["type"] == "object"
    assert "params" in analyze_input["properties"]
    # flattened: no $ref left for the client to resolve
    assert "$ref" not in str(analyze_input)
    assert routes["shout"]["output"]["type"] == "string"
    assert routes["shout"]["input"]["root_input"] is True
    stream = schema_json(get_service_spec(LanguageModel))["routes"][0]
    assert stream["output"]["is_stream"] is True


def test_tensor_examples_are_zeros_of_the_declared_shape_and_dtype():
    """Swagger UI made `[[0, "NaN", 0, "NaN"]]` from the element schema; now every tensor
    has an example the server accepts, unless the parameter gives its own."""
    import pytest

    iris = pytest.importorskip("examples.iris")
    descriptors = pytest.importorskip("examples.descriptors")
    doc = openapi(get_service_spec(iris.Iris))
    body = doc["paths"]["/species"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"]["properties"]["x"]["examples"] == [[[0.0, 0.0, 0.0, 0.0]]]
    root = doc["paths"]["/predict"]["post"]["requestBody"]["content"]["application/json"]
    assert root["schema"]["examples"] == [[[0.0, 0.0, 0.0, 0.0]]]
    classify = doc["paths"]["/classify"]["post"]["requestBody"]["content"]["application/json"]
    assert classify["schema"]["properties"]["x"]["examples"] == [[[5.1, 3.5, 1.4, 0.2]]]
    schemas = openapi(get_service_spec(descriptors.Retrieval))["components"]["schemas"]
    assert schemas["Embedding"]["properties"]["vector"]["examples"] == [[0.0]]
    assert "NaN" not in str([p.get("examples") for p in schemas["Embedding"]["properties"]
                             .values()])


def test_openapi_declares_the_bearer_scheme_when_auth_is_on():
    spec = get_service_spec(TextGenerator)
    assert "security" not in openapi(spec)
    assert "securitySchemes" not in openapi(spec)["components"]
    doc = openapi(spec, auth=True)
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        **doc["components"]["securitySchemes"]["bearerAuth"], "type": "http",
        "scheme": "bearer"}
    assert doc["security"] == [{"bearerAuth": []}]
    assert "401" in doc["paths"]["/complete"]["post"]["responses"]
    assert doc["paths"]["/livez"]["get"]["security"] == []  # probes stay open
    closed = openapi(spec, auth=True, open_health=False)
    assert "security" not in closed["paths"]["/livez"]["get"]


def test_openapi_server_url_is_the_root_path():
    spec = get_service_spec(TextGenerator)
    assert "servers" not in openapi(spec)
    assert openapi(spec, root_path="/models/gen")["servers"] == [{"url": "/models/gen"}]
