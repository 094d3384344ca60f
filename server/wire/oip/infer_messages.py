"""Whole gRPC messages (`ModelInferRequest` / `ModelInferResponse`), duck-typed.

The `tensorwire.inference` classes, tritonclient's or any other compiled `inference`
proto fit: only field names are used. `InferParameter` maps become plain dicts.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np

from .datatypes import OIPError, check_shape, check_unique
from .raw import array_from_raw, raw_from_array
from .typed import array_from_contents

_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX: Final = 2**64 - 1

ParamValue = bool | int | float | str


def params_from_proto(params: Mapping[str, Any]) -> dict[str, ParamValue]:
    """A `map<string, InferParameter>` as a plain dict (entries with no value set, as
    MLServer's trimmed proto produces for double/uint64 values, are left out)."""
    out: dict[str, ParamValue] = {}
    for key, param in params.items():
        which = param.WhichOneof("parameter_choice")
        if which is not None:
            out[key] = getattr(param, which)
    return out


def params_to_proto(target: Any, params: Mapping[str, ParamValue]) -> None:
    """Fill a `map<string, InferParameter>`: bool, int64 (uint64 above it), double,
    string. Raises TypeError/ValueError for other values or integers out of range."""
    for key, value in params.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_param = value
        elif isinstance(value, int):
            if _INT64[0] <= value <= _INT64[1]:
                param.int64_param = value
            elif 0 <= value <= _UINT64_MAX:
                param.uint64_param = value
            else:
                raise ValueError(f"parameter {key!r}: {value} fits neither int64 nor uint64")
        elif isinstance(value, float):
            param.double_param = value
        elif isinstance(value, str):
            param.string_param = value
        else:
            raise TypeError(f"parameter {key!r}: {type(value).__name__} is not a "
                            "bool, int, float or str")


# --- gRPC messages (duck-typed) -------------------------------------------------------


def arrays_from_infer_request(request: Any, raw: Sequence[Any] | None = None,
                              shared: Container[str] = ()) -> dict[str, np.ndarray]:
    """The input arrays of a `ModelInferRequest`, by name in request order.

    Triton's rules: when `raw_input_contents` is used no input may set `contents`, and
    there is one raw entry per input, in order; otherwise each input's typed contents
    (an input with neither and a non-empty shape has no data). Names must be unique.
    Raw arrays are views of the message's bytes (read-only).

    `raw`, when given, stands for `raw_input_contents`: the entries a server cut out
    of the received message before parsing the rest (views of the buffer grpc handed
    over, so the arrays are too), the message itself then holding none.

    `shared` names the inputs whose bytes are in a shared-memory region (Triton's
    extension; the server reads them, and refuses `contents` beside one): they are
    left out and take no raw entry.
    """
    inputs = list(request.inputs)
    if raw is None:
        raw = request.raw_input_contents
    names = [inp.name for inp in inputs]
    check_unique(names, "input")
    if shared:
        inputs = [inp for inp in inputs if inp.name not in shared]
    out: dict[str, np.ndarray] = {}
    if len(raw):
        for inp in inputs:
            if inp.HasField("contents"):
                raise OIPError.tensor(inp.name, "contents must not be set when the request "
                                                "uses raw_input_contents")
        if len(raw) > len(inputs):
            raise OIPError.body(f"the request has {len(raw)} raw_input_contents entries "
                                f"for {len(inputs)} inputs")
        for i, inp in enumerate(inputs):
            if i >= len(raw):
                raise OIPError.tensor(inp.name, "unable to find data for this input: "
                                                "raw_input_contents has no entry for it")
            out[inp.name] = array_from_raw(raw[i], inp.datatype, inp.shape, inp.name)
        return out
    for inp in inputs:
        if not inp.HasField("contents"):
            dims = check_shape(inp.shape, inp.name)
            if math.prod(dims):
                raise OIPError.tensor(inp.name, "unable to find data for this input: "
                                                "neither contents nor raw_input_contents")
        out[inp.name] = array_from_contents(inp.contents, inp.datatype, inp.shape, inp.name)
    return out


def fill_infer_response(response: Any, outputs: Iterable[tuple[str, Any]]) -> None:
    """Append outputs to a `ModelInferResponse` in raw form, as tritonclient expects:
    each output's name, datatype and shape in `outputs`, its bytes in the matching
    `raw_output_contents` entry (protobuf takes `bytes`: one copy per output)."""
    for name, arr in outputs:
        dt, shape, data = raw_from_array(arr)
        tensor = response.outputs.add()
        tensor.name = name
        tensor.datatype = dt
        tensor.shape.extend(shape)
        response.raw_output_contents.append(data if isinstance(data, bytes) else bytes(data))

