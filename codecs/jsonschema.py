"""JSON Schema, flattened: local `$ref`s resolved into the nodes that use them.

Both the protobuf contract (the `(tensorwire.v1.json_schema)` option of a JSON-text field)
and BentoML's flat `/schema.json` need a schema without `$defs`: one resolver serves both.
"""

from __future__ import annotations

from typing import Any


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every `#/$defs/...` reference replaced by its definition.

    Keys beside a `$ref` (a description, a default) are kept over the definition's; a
    reference back into a definition being resolved (a recursive model) stays an open
    `{"type": "object"}`, so the result is always finite.
    """
    defs = schema.get("$defs", {})

    def resolve(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.rsplit("/", 1)[-1]
                rest = {k: v for k, v in node.items() if k != "$ref"}
                if name in seen or name not in defs:
                    return rest | {"type": "object"}
                return resolve({**defs[name], **rest}, seen | {name})
            return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [resolve(v, seen) for v in node]
        return node

    return resolve(schema, frozenset())
