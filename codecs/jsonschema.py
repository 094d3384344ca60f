"""JSON Schema, flattened: local `$ref`s resolved into the nodes that use them, and the
BentoML dialect of tensors and tables.

Both the protobuf contract (the `(tensorwire.v1.json_schema)` option of a JSON-text field)
and BentoML's flat `/schema.json` need a schema without `$defs`: one resolver serves both.
The codecs mark their tensors and tables with the `format`s named here, which
`bentoml_forms` rewrites into the nodes BentoML's client reads.
"""

from __future__ import annotations

import math
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


#: The `format` of a tensor's schema, per framework (`codecs.frameworks`).
NUMPY_FORMAT, TORCH_FORMAT, TF_FORMAT = "numpy-array", "torch-tensor", "tf-tensor"
_TENSOR_FORMATS = frozenset({NUMPY_FORMAT, TORCH_FORMAT, TF_FORMAT})
#: The `format` of a DataFrame's schema (`codecs.dataframe`).
FRAME_FORMAT = "pandas-dataframe"
#: Keys of a schema node that say what it is for rather than what it holds: kept.
_DOC_KEYS = ("title", "description", "examples", "default")


def bentoml_forms(node: Any) -> Any:
    """Tensors and DataFrames in the form BentoML 1.4 publishes them, which its client
    needs to serialise inputs and rebuild outputs:
    `{"type": "tensor", "format": "numpy-array", "dtype": "float32", "shape": [1, 4]}`
    and `{"type": "dataframe", "orient": "records", "columns": [...]}`.

    The codecs describe them as nested arrays / objects (valid JSON Schema, what OpenAPI
    shows); this is schema.json's own dialect. tensorwire's client reads both.
    """
    if isinstance(node, list):
        return [bentoml_forms(v) for v in node]
    if not isinstance(node, dict):
        return node
    fmt = node.get("format")
    fmt = fmt if isinstance(fmt, str) else None  # a property called "format" is no format
    if fmt in _TENSOR_FORMATS:
        out: dict[str, Any] = {k: node[k] for k in _DOC_KEYS if k in node}
        out.update({"type": "tensor", "format": fmt})
        if "dtype" in node:
            out["dtype"] = node["dtype"]
        if "shape" in node:
            out["shape"] = node["shape"]
            if all(d >= 0 for d in node["shape"]):
                out["dim"] = math.prod(node["shape"])
        return out
    if fmt == FRAME_FORMAT:
        out = {k: node[k] for k in _DOC_KEYS if k in node}
        out.update({"type": "dataframe", "orient": node.get("orient", "records")})
        for key in ("columns", "dtypes"):
            if key in node:
                out[key] = node[key]
        return out
    return {k: bentoml_forms(v) for k, v in node.items()}
