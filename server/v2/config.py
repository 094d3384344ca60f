"""Triton's model configuration extension: a v2 model's `ModelConfig`, from its API.

Triton keeps a `config.pbtxt` per model; tensorwire has the API's signature, which
already says everything the configuration's readers ask (perf_analyzer, Triton's image
client, model analyzers): the inputs and outputs with their `data_type` and `dims`, and
the batching. One dict in Triton's JSON form (`GET /v2/models/{m}/config` answers it;
the gRPC `ModelConfig` parses the same dict into the message), so both protocols say the
same thing:

- `max_batch_size` is the API's `max_batch_size` when it is batchable along the first
  dimension of every input and output tensor (Triton's batch dimension), else 0. A
  batchable API with a non-tensor input (a per-request option) still batches, but says
  0: Triton's form gives every input a batch dimension, and a client would send one;
- `dims` are the metadata's shape without the batch dimension when `max_batch_size` > 0
  (a per-item scalar is Triton's `dims: [1]` with `reshape: {shape: []}`), else the
  whole shape; -1 marks a free dimension, as in metadata;
- `dynamic_batching` (with the API's `max_latency_ms` as `max_queue_delay_microseconds`)
  when the API batches;
- an input whose field has a default is `optional`;
- an input of three known dimensions (besides the batch) whose last is 1, 3 or 4 is
  `FORMAT_NHWC`, whose first is 1 or 3 `FORMAT_NCHW` (what an image client lays its
  pixels out by); any other `FORMAT_NONE`.
"""

from __future__ import annotations

from typing import Any

from ..codecs.v2_facet import TensorMeta
from .model import PLATFORM, V2Model

#: OIP datatype -> Triton's `DataType` enum name (BYTES is TYPE_STRING there).
DATA_TYPES = {
    "BOOL": "TYPE_BOOL", "UINT8": "TYPE_UINT8", "UINT16": "TYPE_UINT16",
    "UINT32": "TYPE_UINT32", "UINT64": "TYPE_UINT64", "INT8": "TYPE_INT8",
    "INT16": "TYPE_INT16", "INT32": "TYPE_INT32", "INT64": "TYPE_INT64",
    "FP16": "TYPE_FP16", "FP32": "TYPE_FP32", "FP64": "TYPE_FP64", "BYTES": "TYPE_STRING",
    "BF16": "TYPE_BF16",
}
#: A tensor that takes any element type (no `DType`): Triton has no name for it.
ANY_TYPE = "TYPE_INVALID"


def batch_size_of(model: V2Model) -> int:
    """Triton's `max_batch_size`: the API's, when every tensor has the batch dimension
    first (see the module docstring), else 0."""
    api = model.api
    if not api.batchable or api.batch_dim != (0, 0) or model.unsupported is not None:
        return 0
    if any(f.codec.batch is None for f in api.fields):
        return 0  # a per-request input: Triton's form has no place for it
    tensors = [*model.inputs, *model.outputs]
    if not tensors or any(not t.shape or t.shape[0] != -1 for t in tensors):
        return 0
    return api.max_batch_size


def _dims(meta: TensorMeta, batched: bool) -> tuple[list[int], dict[str, Any] | None]:
    """(dims, reshape) of one tensor (see the module docstring)."""
    dims = list(meta.shape[1:] if batched else meta.shape)
    if batched and not dims:
        return [1], {"shape": []}
    return dims, None


def _format(dims: list[int]) -> str:
    if len(dims) != 3 or any(d <= 0 for d in dims):
        return "FORMAT_NONE"
    if dims[2] in (1, 3, 4):
        return "FORMAT_NHWC"
    if dims[0] in (1, 3):
        return "FORMAT_NCHW"
    return "FORMAT_NONE"


def model_config(model: V2Model) -> dict[str, Any]:
    """The model's configuration in Triton's JSON form (field names as in
    model_config.proto, enums by name, 64-bit integers as numbers)."""
    batch = batch_size_of(model)
    optional = {f.name for f in model.api.fields if not f.required}
    inputs = []
    for meta in model.inputs:
        dims, reshape = _dims(meta, batch > 0)
        entry: dict[str, Any] = {
            "name": meta.name, "data_type": DATA_TYPES.get(meta.datatype, ANY_TYPE),
            "format": _format(dims), "dims": dims, "is_shape_tensor": False,
            "allow_ragged_batch": False,
            "optional": _field_of(model, meta.name) in optional}
        if reshape is not None:
            entry["reshape"] = reshape
        inputs.append(entry)
    outputs = []
    for meta in model.outputs:
        dims, reshape = _dims(meta, batch > 0)
        entry = {"name": meta.name, "data_type": DATA_TYPES.get(meta.datatype, ANY_TYPE),
                 "dims": dims, "label_filename": "", "is_shape_tensor": False}
        if reshape is not None:
            entry["reshape"] = reshape
        outputs.append(entry)
    config: dict[str, Any] = {
        "name": model.name, "platform": PLATFORM, "backend": PLATFORM,
        "version_policy": {"specific": {"versions": [int(model.version)]}},
        "max_batch_size": batch, "input": inputs, "output": outputs,
        "model_transaction_policy": {"decoupled": model.decoupled},
    }
    if model.api.batchable:
        config["dynamic_batching"] = {
            "max_queue_delay_microseconds": int(model.api.max_latency_ms * 1000),
            "preserve_ordering": True}
    return config


def _field_of(model: V2Model, input_name: str) -> str:
    """The API field an input belongs to (a frame's column is its frame's)."""
    claimed = model.claimed.get(input_name)
    if claimed is not None:
        return claimed.field.name
    return model.catch_all.field.name if model.catch_all is not None else input_name
