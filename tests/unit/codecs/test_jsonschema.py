"""codecs.jsonschema: the BentoML dialect of tensor and table schemas, keyed by the
`format`s the codecs write."""

from __future__ import annotations

from tensorwire.codecs.frameworks import NumpyFramework, TensorflowFramework, TorchFramework
from tensorwire.codecs.jsonschema import FRAME_FORMAT, bentoml_forms


def test_a_tensor_node_becomes_bentomls_tensor_form() -> None:
    node = {"type": "array", "items": {"type": "array"}, "format": "numpy-array",
            "dtype": "float32", "shape": [1, 4], "title": "x"}
    assert bentoml_forms(node) == {"title": "x", "type": "tensor", "format": "numpy-array",
                                   "dtype": "float32", "shape": [1, 4], "dim": 4}
    unknown_size = {**node, "shape": [-1, 4]}
    assert "dim" not in bentoml_forms(unknown_size)


def test_a_table_node_becomes_bentomls_dataframe_form() -> None:
    node = {"type": "array", "format": FRAME_FORMAT, "orient": "columns",
            "columns": ["a"], "description": "d"}
    assert bentoml_forms(node) == {"description": "d", "type": "dataframe",
                                   "orient": "columns", "columns": ["a"]}


def test_nested_nodes_are_rewritten_and_a_property_named_format_is_left_alone() -> None:
    schema = {"type": "object", "properties": {
        "format": {"type": "string"},
        "t": {"type": "array", "format": "torch-tensor", "dtype": "int64"}}}
    out = bentoml_forms(schema)
    assert out["properties"]["format"] == {"type": "string"}
    assert out["properties"]["t"] == {"type": "tensor", "format": "torch-tensor",
                                      "dtype": "int64"}


def test_every_framework_writes_a_format_the_dialect_knows() -> None:
    for framework in (NumpyFramework, TorchFramework, TensorflowFramework):
        node = {"type": "array", "format": framework.format}
        assert bentoml_forms(node)["type"] == "tensor", framework
