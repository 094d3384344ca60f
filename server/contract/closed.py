"""Unknown fields are refused inside the user's models too, not only at the top level.

pydantic drops the fields a model does not declare unless the model says otherwise
(`extra="ignore"` is its default): `{"params": {"tag": ["a"]}}` for a `tags` field, or
`{"topk": 1}` at the top of an `input_spec=` API, would validate with the field left at
its default, a typo silently ignored. The input models tensorwire generates forbid
extra fields (`signature.INPUT_CONFIG`); a user's model (a parameter's type, a model
nested in one, an `input_spec`) is validated with a *copy* of its pydantic core schema in
which each model that does not set `extra` in its own `model_config` forbids them. A
model that sets `extra` ("allow", "ignore" or "forbid") keeps its choice.

The user's classes are not touched: they validate as before in the user's own code, and
the values decoded here are still instances of them. The JSON schemas (schema.json,
OpenAPI) are the user's models' own, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic_core import CoreSchema, SchemaValidator


def closed_schema(schema: CoreSchema) -> CoreSchema | None:
    """A copy of `schema` in which every model that leaves `extra` unset forbids unknown
    fields; None when there is no such model (the schema is closed already)."""
    changed: list[bool] = []
    copy = _close(schema, changed)
    return copy if changed else None


def closed_validator(validator: Any) -> SchemaValidator | None:
    """A validator like `validator` (a pydantic-core SchemaValidator) whose models all
    refuse unknown fields unless they set `extra`; None when it refuses them already.

    The schema and core config it was built from are the ones it pickles itself with
    (`__reduce__`), so the copy keeps every setting of the original (`val_json_bytes`,
    `allow_inf_nan`, ...) without translating a ConfigDict again.
    """
    validator = getattr(validator, "_schema_validator", validator)  # a plugin's wrapper
    if not isinstance(validator, SchemaValidator):
        return None
    schema, config = validator.__reduce__()[1][:2]  # type: ignore[index]
    closed = closed_schema(schema)
    # Not the classes' own (prebuilt) validators, which pydantic-core would otherwise
    # reuse for every model node: they are the open ones.
    return None if closed is None else SchemaValidator(closed, config, _use_prebuilt=False)


def closed_model_validator(model: type[BaseModel]) -> SchemaValidator | None:
    """`closed_validator` of a model's; None when it and every model in it are closed,
    or when it cannot be built yet (a forward reference still unresolved: pydantic
    reports that on first use)."""
    if not model.__pydantic_complete__ and not model.model_rebuild(raise_errors=False):
        return None
    return closed_validator(model.__pydantic_validator__)


def closed_adapter_validator(adapter: TypeAdapter[Any]) -> SchemaValidator | None:
    """`closed_validator` of a TypeAdapter's (None when it is closed already)."""
    return closed_validator(adapter.validator)


def _close(node: Any, changed: list[bool]) -> Any:
    """Copy the dicts and lists of a core schema, forbidding extra fields on the way."""
    if isinstance(node, list):
        return [_close(item, changed) for item in node]
    if not isinstance(node, Mapping):
        return node  # classes, functions, defaults: shared, never copied
    out = {key: _close(value, changed) for key, value in node.items()}
    if out.get("type") == "model" and _leaves_extra_unset(out.get("cls")):
        fields = out.get("schema")
        if isinstance(fields, dict) and fields.get("type") == "model-fields" \
                and "extra_behavior" not in fields:
            fields["extra_behavior"] = "forbid"
            changed.append(True)
    return out


def _leaves_extra_unset(cls: Any) -> bool:
    config = getattr(cls, "model_config", None)
    return isinstance(config, Mapping) and "extra" not in config
