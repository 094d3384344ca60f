"""Open Inference Protocol (KServe v2) tensors on the wire: pure helpers, no transport.

Everything here turns protocol bytes and JSON values into NumPy arrays and back, and
checks them, so that the HTTP (`/v2/...`) and gRPC (`inference.GRPCInferenceService`)
transports only move bytes. Nothing here imports aiohttp, grpc, pydantic or protobuf:
gRPC messages are read and written duck-typed (the `tensorwire.inference` classes,
tritonclient's or any other compiled `inference` proto fit).

Four representations of one tensor, each with a pair of functions:

- raw bytes (gRPC `raw_input_contents` / `raw_output_contents`, the HTTP binary
  extension): `array_from_raw` / `raw_from_array`;
- typed `InferTensorContents` fields: `array_from_contents` / `contents_from_array`;
- KServe v2 JSON `data`: `array_from_json` / `json_from_array`;
- whole HTTP bodies with Triton's binary extension: `parse_http_infer_request` /
  `build_http_infer_response` (`read_http_infer_request`: one read as it arrives,
  straight into one buffer); whole gRPC messages: `arrays_from_infer_request` /
  `fill_infer_response`.

One module per representation: `datatypes` (the type table, shapes, `OIPError`), `raw`,
`typed` (contents and JSON), `messages` (gRPC) and `binary` (HTTP bodies); this package
re-exports their public names.

Guarantees, for hostile input: no allocation is sized by a client's claim. A shape is
checked (integers, none negative, rank at most `MAX_RANK`, element span addressable)
and prod(shape) x itemsize is compared with the bytes actually received before any
array exists; BYTES element counts are bounded by the bytes received (each element needs
its 4-byte length) before the object array is made. Every violation raises `OIPError`,
an `InvalidArgument` (HTTP 400 / gRPC INVALID_ARGUMENT) whose message names the tensor.
Raw arrays are zero-copy `frombuffer` views of the received buffer: read-only when the
buffer is, and possibly unaligned when they sit at an odd offset of an HTTP body (NumPy
and torch handle both; a consumer that must write copies once).

Encoding raises `TypeError` for arrays the protocol cannot carry (complex, datetime,
objects that are not str/bytes): that is the server's own output, not the client's
fault. The wire is little-endian; BYTES elements are a 4-byte little-endian length
followed by the bytes; BF16 is `ml_dtypes.bfloat16` (imported on first use; the
same two bytes tritonclient sends, its older float32 truncation included).
"""

from __future__ import annotations

from .binary import (
    HttpInferRequest,
    HttpInferResponse,
    RawInput,
    RequestedOutput,
    RequestInput,
    ResponseOutput,
    build_http_infer_response,
    parse_header_length,
    parse_http_infer_request,
)
from .datatypes import (
    BINARY_EXTENSION,
    BYTES,
    CONTENTS_FIELDS,
    DATATYPES,
    INFERENCE_HEADER_CONTENT_LENGTH,
    MAX_RANK,
    Datatype,
    OIPError,
    check_shape,
    datatype,
    datatype_of,
)
from .infer_messages import (
    arrays_from_infer_request,
    fill_infer_response,
    params_from_proto,
    params_to_proto,
)
from .raw import array_from_raw, raw_from_array, serialize_bytes
from .streamed import read_http_infer_request
from .typed import array_from_contents, array_from_json, contents_from_array, json_from_array

__all__ = [
    "BINARY_EXTENSION",
    "BYTES",
    "CONTENTS_FIELDS",
    "DATATYPES",
    "INFERENCE_HEADER_CONTENT_LENGTH",
    "MAX_RANK",
    "Datatype",
    "HttpInferRequest",
    "HttpInferResponse",
    "OIPError",
    "RawInput",
    "RequestInput",
    "RequestedOutput",
    "ResponseOutput",
    "array_from_contents",
    "array_from_json",
    "array_from_raw",
    "arrays_from_infer_request",
    "build_http_infer_response",
    "check_shape",
    "contents_from_array",
    "datatype",
    "datatype_of",
    "fill_infer_response",
    "json_from_array",
    "params_from_proto",
    "params_to_proto",
    "parse_header_length",
    "parse_http_infer_request",
    "raw_from_array",
    "read_http_infer_request",
    "serialize_bytes",
]
