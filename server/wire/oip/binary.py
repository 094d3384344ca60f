"""HTTP inference bodies: JSON, and Triton's binary tensor extension in both directions.

A request body is a JSON header followed by the binary inputs it declares (with
`Inference-Header-Content-Length`), or, with a header length of 0, the raw bytes of the
model's only input (`streamed` reads one as it arrives). A response is written as
chunks: the JSON header, then each binary output's bytes (views of the arrays).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import orjson

from .datatypes import (
    BYTES,
    INFERENCE_HEADER_CONTENT_LENGTH,
    LENGTH_PREFIX,
    MAX_ELEMENT,
    Datatype,
    OIPError,
    check_shape,
    check_unique,
    datatype,
)
from .raw import array_from_raw, byte_view, raw_from_array
from .typed import array_from_json, json_from_array


class RawInput(Protocol):
    """The one input a raw body fills, as model metadata describes it (the v2 facet's
    `TensorMeta`): `shape` None means any shape, -1 marks a variable dimension. Needed
    to read a raw body, which names nothing."""

    @property
    def name(self) -> str: ...

    @property
    def datatype(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...] | None: ...


@dataclass(frozen=True, slots=True)
class RequestInput:
    """One input of an HTTP inference request, checked but not yet decoded."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    parameters: dict[str, Any]
    #: The JSON `data` member, for an input sent as JSON.
    data: Any = None
    #: Its bytes in the body (a view, no copy), for an input with `binary_data_size`.
    raw: memoryview | None = None

    @property
    def binary(self) -> bool:
        return self.raw is not None

    def to_numpy(self) -> np.ndarray:
        """The input as an array: a view of the body for binary inputs."""
        if self.raw is not None:
            return array_from_raw(self.raw, self.datatype, self.shape, self.name)
        return array_from_json(self.data, self.datatype, self.shape, self.name)


@dataclass(frozen=True, slots=True)
class RequestedOutput:
    """One output the client listed, with its `binary_data` choice resolved."""

    name: str
    parameters: dict[str, Any]
    binary: bool


@dataclass(frozen=True, slots=True)
class HttpInferRequest:
    """A parsed HTTP inference request (JSON or binary-extension body)."""

    #: The JSON inference request as parsed (for a raw body: the equivalent header).
    header: dict[str, Any]
    inputs: tuple[RequestInput, ...]
    #: The outputs the client listed; empty means every output.
    outputs: tuple[RequestedOutput, ...]
    #: The request's `binary_data_output` (False when absent): the default for outputs.
    binary_output: bool = False

    @property
    def id(self) -> str | None:
        return self.header.get("id")

    @property
    def parameters(self) -> dict[str, Any]:
        return self.header.get("parameters") or {}

    def wants_binary(self, output: str) -> bool:
        """Whether `output` goes back as binary data: its own `binary_data` when the
        client listed it with one, else the request's `binary_data_output`."""
        for o in self.outputs:
            if o.name == output:
                return o.binary
        return self.binary_output

    def arrays(self) -> dict[str, np.ndarray]:
        """Every input decoded, by name in request order."""
        return {i.name: i.to_numpy() for i in self.inputs}


def parse_header_length(value: str | int | None, body_length: int) -> int | None:
    """The `Inference-Header-Content-Length` value, checked against the body length.

    None when the header is absent (the whole body is JSON). Refuses anything but a
    decimal integer in [0, body_length].
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
            raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} must be an integer, "
                                f"got {value[:40]!r}")
        length = int(text)
    elif isinstance(value, int) and not isinstance(value, bool):
        length = value
    else:
        raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} must be an integer")
    if length < 0:
        raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} {length} is negative")
    if length > body_length:
        raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} {length} exceeds the "
                            f"body's {body_length} bytes")
    return length


def parse_http_infer_request(body: Any, header_length: str | int | None, *,
                             raw_input: RawInput | None = None) -> HttpInferRequest:
    """Parse an HTTP inference request body, with or without binary tensors.

    `header_length` is the `Inference-Header-Content-Length` header as received (None
    when absent: the whole body is the JSON request). With a length, the body is that
    many bytes of JSON followed by the binary inputs, concatenated in the order of the
    inputs that carry `parameters.binary_data_size`; each size must fit in what
    remains and together they must use the body exactly. A length of 0 is Triton's raw
    body: the whole body is the data of the model's only input, `raw_input` (None when
    the model has not exactly one input, which refuses the request).

    The JSON header is checked for structure (inputs with a name, known datatype,
    valid shape and `data`, `binary_data_size` or `shared_memory_region` (the server's
    to read); unique names; outputs with a name; boolean `binary_data`/
    `binary_data_output`); tensors are decoded later by `RequestInput.to_numpy`.
    """
    view = byte_view(body)
    length = parse_header_length(header_length, view.nbytes)
    if length == 0:
        return raw_request(view, raw_spec(raw_input))
    request = parse_json_header(view if length is None else view[:length])
    if length is None:
        return with_binary(request, None, 0, whole_json=True)
    return with_binary(request, view[length:], view.nbytes - length)


def raw_spec(raw_input: RawInput | None) -> RawInput:
    if raw_input is None:
        raise OIPError.body("a raw request body (Inference-Header-Content-Length: 0) "
                            "needs a model with exactly one input")
    return raw_input


def parse_json_header(head: Any) -> HttpInferRequest:
    """The JSON request of a body's first bytes (or a whole JSON body), checked."""
    try:
        header = orjson.loads(head)
    except orjson.JSONDecodeError as exc:
        raise OIPError.body(f"the inference request is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise OIPError.body("the inference request must be a JSON object")
    return _check_header(header)


def with_binary(request: HttpInferRequest, region: memoryview | None, size: int, *,
                 whole_json: bool = False) -> HttpInferRequest:
    """`request` with each binary input's bytes: consecutive slices of the `size` bytes
    after the JSON header (`region`; None: check the sizes only, nothing is read). A
    request without the header length (`whole_json`: the body is all JSON) may have no
    binary input."""
    inputs: list[RequestInput] = []
    offset = 0
    for inp in request.inputs:
        if not inp.binary:
            inputs.append(inp)
            continue
        if whole_json:
            raise OIPError.tensor(inp.name, f"binary_data_size needs the "
                                            f"{INFERENCE_HEADER_CONTENT_LENGTH} header")
        nbytes = inp.parameters["binary_data_size"]
        if nbytes > size - offset:
            raise OIPError.tensor(inp.name, f"binary_data_size {nbytes} runs past the end "
                                            f"of the body ({size - offset} bytes remain)")
        raw = region[offset:offset + nbytes] if region is not None else inp.raw
        inputs.append(RequestInput(inp.name, inp.datatype, inp.shape, inp.parameters,
                                   raw=raw))
        offset += nbytes
    if offset != size:
        raise OIPError.body(f"{size - offset} bytes follow the JSON header and "
                            "the binary inputs it declares")
    return HttpInferRequest(request.header, tuple(inputs), request.outputs,
                            request.binary_output)


def _params(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    params = obj.get("parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise OIPError.body(f"{where}: parameters must be a JSON object")
    return params


def _flag(params: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = params.get(key)
    if value is not None and not isinstance(value, bool):
        raise OIPError.body(f"{where}: parameter {key} must be a boolean")
    return value


def _check_header(header: dict[str, Any]) -> HttpInferRequest:
    """Structure checks of a JSON inference request; binary inputs get a placeholder
    empty `raw` that the caller replaces with their slice of the body."""
    if "id" in header and not isinstance(header["id"], str):
        raise OIPError.body("the request id must be a string")
    binary_output = bool(_flag(_params(header, "the request"), "binary_data_output",
                               "the request"))
    raw_inputs = header.get("inputs")
    if not isinstance(raw_inputs, list):
        raise OIPError.body("the inference request needs an 'inputs' list")
    inputs: list[RequestInput] = []
    for i, obj in enumerate(raw_inputs):
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise OIPError.body(f"inputs[{i}] must be an object with a string name")
        name = obj["name"]
        dt = datatype(obj.get("datatype"), name)
        dims = check_shape(obj.get("shape"), name, dt)
        params = _params(obj, f"input {name!r}")
        size = params.get("binary_data_size")
        if size is None:
            if "data" not in obj and "shared_memory_region" not in params:
                raise OIPError.tensor(name, "has neither data nor binary_data_size")
            inputs.append(RequestInput(name, dt.name, dims, params, data=obj.get("data")))
            continue
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise OIPError.tensor(name, "binary_data_size must be a non-negative integer")
        if "data" in obj:
            raise OIPError.tensor(name, "has both data and binary_data_size")
        if dt is not BYTES and size != math.prod(dims) * dt.itemsize:
            raise OIPError.tensor(name, f"binary_data_size {size} does not match shape "
                                        f"{list(dims)} of {dt.name} "
                                        f"({math.prod(dims) * dt.itemsize} bytes)")
        inputs.append(RequestInput(name, dt.name, dims, params, raw=memoryview(b"")))
    check_unique([i.name for i in inputs], "input")
    raw_outputs = header.get("outputs", [])
    if not isinstance(raw_outputs, list):
        raise OIPError.body("'outputs' must be a list")
    outputs: list[RequestedOutput] = []
    for i, obj in enumerate(raw_outputs):
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise OIPError.body(f"outputs[{i}] must be an object with a string name")
        params = _params(obj, f"output {obj['name']!r}")
        binary = _flag(params, "binary_data", f"output {obj['name']!r}")
        outputs.append(RequestedOutput(obj["name"], params,
                                       binary_output if binary is None else binary))
    check_unique([o.name for o in outputs], "output")
    return HttpInferRequest(header, tuple(inputs), tuple(outputs), binary_output)


def raw_shape(nbytes: int, spec: RawInput) -> tuple[Datatype, tuple[int, ...]]:
    """The datatype and shape of a raw body of `nbytes` bytes filling `spec` (its
    refusals are the raw body's: made before any byte is read)."""
    dt = datatype(spec.datatype, spec.name)
    declared = list(spec.shape) if spec.shape is not None else [-1]
    if any(isinstance(d, bool) or not isinstance(d, int) or d < -1 for d in declared):
        raise ValueError(f"model input {spec.name!r} has an invalid shape {declared}")
    if dt is BYTES:
        if not declared or any(d not in (1, -1) for d in declared):
            raise OIPError.tensor(spec.name, f"a raw body fills a BYTES input only when "
                                             f"its shape is [1], not {declared}")
        if nbytes > MAX_ELEMENT:
            raise OIPError.tensor(spec.name, "a BYTES element cannot exceed 2**32 - 1 bytes")
        return dt, tuple(1 for _ in declared)
    if declared.count(-1) > 1 and declared[0] == -1:
        declared[0] = 1  # a batch of one, as Triton treats a raw request
    if declared.count(-1) > 1:
        raise OIPError.tensor(spec.name, f"a raw body cannot fill shape {declared}: "
                                         "more than one variable dimension")
    fixed = math.prod(d for d in declared if d != -1) * dt.itemsize
    if -1 in declared:
        if fixed == 0 or nbytes % fixed:
            raise OIPError.tensor(spec.name, f"{nbytes} bytes are not a whole "
                                             f"number of {dt.name} elements of shape "
                                             f"{declared}")
        declared[declared.index(-1)] = nbytes // fixed
    elif nbytes != fixed:
        raise OIPError.tensor(spec.name, f"has {nbytes} bytes of data, but shape "
                                         f"{declared} of {dt.name} needs {fixed}")
    return dt, check_shape(declared, spec.name, dt)


def raw_request(view: memoryview, spec: RawInput) -> HttpInferRequest:
    """Triton's raw body: all of it is the one input; at most one variable dimension
    (a leading -1 beside another counts as batch size 1), BYTES as one element of
    shape [1] (the body is the element's bytes, no length prefix); every output binary.
    """
    dt, shape = raw_shape(view.nbytes, spec)
    data = (memoryview(LENGTH_PREFIX.pack(view.nbytes) + view.tobytes()) if dt is BYTES
            else view)
    params = {"binary_data_size": data.nbytes}
    header = {"inputs": [{"name": spec.name, "datatype": dt.name, "shape": list(shape),
                          "parameters": params}],
              "parameters": {"binary_data_output": True}}
    inp = RequestInput(spec.name, dt.name, shape, params, raw=data)
    return HttpInferRequest(header, (inp,), (), binary_output=True)


@dataclass(frozen=True, slots=True)
class ResponseOutput:
    """One output to send: its array, whether as binary data, and extra parameters."""

    name: str
    array: Any
    binary: bool = True
    parameters: Mapping[str, Any] | None = None
    shared: bool = False  # its bytes went to a shared-memory region: not in the body


@dataclass(frozen=True, slots=True)
class HttpInferResponse:
    """An HTTP inference response body, ready to write chunk by chunk."""

    #: The JSON header first, then each binary output's bytes in output order.
    chunks: list[bytes | memoryview] = field(default_factory=list)
    #: The `Inference-Header-Content-Length` value; None when no output is binary,
    #: the body is then plain JSON and the header must not be sent.
    header_length: int | None = None

    @property
    def content_length(self) -> int:
        return sum(memoryview(c).nbytes for c in self.chunks)

    @property
    def content_type(self) -> str:
        """What to send as Content-Type (tritonclient does not read it)."""
        return "application/json" if self.header_length is None else \
            "application/octet-stream"

    def body(self) -> bytes:
        """The chunks joined (one copy): for callers that cannot write chunks."""
        return b"".join(self.chunks)


def build_http_infer_response(outputs: Iterable[ResponseOutput], *, model_name: str,
                              model_version: str | None = None, id: str | None = None,
                              parameters: Mapping[str, Any] | None = None,
                              ) -> HttpInferResponse:
    """The body of an inference response: a JSON header whose binary outputs carry
    `parameters.binary_data_size`, followed by their bytes (views of the arrays where
    contiguous). JSON outputs carry flat row-major `data` (see `json_from_array`)."""
    head: dict[str, Any] = {"model_name": model_name}
    if model_version:
        head["model_version"] = model_version
    if id:
        head["id"] = id
    if parameters:
        head["parameters"] = dict(parameters)
    tensors: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = [b""]
    for out in outputs:
        params = dict(out.parameters or {})
        if out.binary:
            dt, shape, data = raw_from_array(out.array)
            tensor: dict[str, Any] = {"name": out.name, "datatype": dt, "shape": shape}
            if not out.shared:
                params["binary_data_size"] = memoryview(data).nbytes
                chunks.append(data)
        else:
            dt, shape, values = json_from_array(out.array, out.name)
            tensor = {"name": out.name, "datatype": dt, "shape": shape, "data": values}
        if params:
            tensor["parameters"] = params
        tensors.append(tensor)
    head["outputs"] = tensors
    chunks[0] = orjson.dumps(head)
    binary = len(chunks) > 1
    return HttpInferResponse(chunks, len(chunks[0]) if binary else None)

