"""Calling a server's Open Inference Protocol with the real client, tritonclient.

`infer(mode, server, model, inputs)` runs one inference in one of four modes:
`http-binary` (tritonclient's default: binary inputs and outputs), `http-json` (every
tensor as JSON `data`), `grpc` and `grpc-aio` (`tritonclient.grpc.aio`), and returns
the outputs as NumPy arrays with their parameters. `plain_v2` / `plain_native` turn an
answer of either route into plain Python, so the v2 route and the native one can be
compared for the same input.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import tritonclient.grpc as tg
import tritonclient.grpc.aio as tga
import tritonclient.http as th
from tritonclient.utils import np_to_triton_dtype

MODES = ("http-binary", "http-json", "grpc", "grpc-aio")
JSON = "application/json"


@dataclass
class V2Reply:
    """The outputs (by name, in answer order), their parameters, the echoed id."""

    outputs: dict[str, np.ndarray]
    parameters: dict[str, dict[str, Any]] = field(default_factory=dict)
    id: str = ""


def texts(*items: str | bytes) -> np.ndarray:
    """A BYTES tensor (object array of bytes) of shape [len(items)]."""
    out = np.empty(len(items), dtype=object)
    out[:] = [i.encode() if isinstance(i, str) else i for i in items]
    return out


def datatype(array: np.ndarray) -> str:
    return "BYTES" if array.dtype == object else np_to_triton_dtype(array.dtype)


def http_client(server: Any) -> th.InferenceServerClient:
    return th.InferenceServerClient(f"127.0.0.1:{server.http_port}")


def grpc_client(server: Any) -> tg.InferenceServerClient:
    return tg.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")


def infer(mode: str, server: Any, model: str, inputs: dict[str, np.ndarray],
          outputs: list[str] | None = None, **options: Any) -> V2Reply:
    """One inference in `mode`; tritonclient's exception on an error answer."""
    if mode.startswith("http"):
        return _http(server, model, inputs, outputs, mode == "http-binary", **options)
    if mode == "grpc":
        client = grpc_client(server)
        try:
            result = client.infer(model, _grpc_inputs(tg, inputs),
                                  outputs=_grpc_outputs(tg, outputs), **options)
        finally:
            client.close()
        return _grpc_reply(result)
    return asyncio.run(_aio(server, model, inputs, outputs, **options))


def _http(server: Any, model: str, inputs: dict[str, np.ndarray], outputs: list[str] | None,
          binary: bool, **options: Any) -> V2Reply:
    client = http_client(server)
    try:
        tensors = []
        for name, array in inputs.items():
            tensor = th.InferInput(name, list(array.shape), datatype(array))
            tensor.set_data_from_numpy(array, binary_data=binary)
            tensors.append(tensor)
        if outputs is None and not binary:
            # tritonclient asks for binary outputs unless they are listed: list them all
            # (a dict's keys are known only from an answer).
            headers = options.get("headers")
            outputs = [o["name"] for o in client.get_model_metadata(
                model, headers=headers)["outputs"]] or [
                o["name"] for o in client.infer(model, tensors, headers=headers
                                                ).get_response()["outputs"]]
        requested = None if outputs is None else [
            th.InferRequestedOutput(n, binary_data=binary) for n in outputs]
        result = client.infer(model, tensors, outputs=requested, **options)
    finally:
        client.close()
    response = result.get_response()
    reply = V2Reply({}, id=response.get("id", ""))
    for out in response["outputs"]:
        reply.outputs[out["name"]] = result.as_numpy(out["name"])
        params = {k: v for k, v in out.get("parameters", {}).items()
                  if k != "binary_data_size"}
        reply.parameters[out["name"]] = params
    return reply


def _grpc_inputs(module: Any, inputs: dict[str, np.ndarray]) -> list[Any]:
    tensors = []
    for name, array in inputs.items():
        tensor = module.InferInput(name, list(array.shape), datatype(array))
        tensor.set_data_from_numpy(array)
        tensors.append(tensor)
    return tensors


def _grpc_outputs(module: Any, outputs: list[str] | None) -> list[Any] | None:
    return None if outputs is None else [module.InferRequestedOutput(n) for n in outputs]


def _grpc_reply(result: Any) -> V2Reply:
    response = result.get_response()
    reply = V2Reply({}, id=response.id)
    for out in response.outputs:
        reply.outputs[out.name] = result.as_numpy(out.name)
        reply.parameters[out.name] = {
            k: getattr(v, v.WhichOneof("parameter_choice")) for k, v in out.parameters.items()}
    return reply


async def _aio(server: Any, model: str, inputs: dict[str, np.ndarray],
               outputs: list[str] | None, **options: Any) -> V2Reply:
    async with tga.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:
        result = await client.infer(model, _grpc_inputs(tga, inputs),
                                    outputs=_grpc_outputs(tga, outputs), **options)
    return _grpc_reply(result)


# ---------------------------------------------------------------------- comparing


def _element(item: Any, content_type: str | None) -> Any:
    if isinstance(item, str):  # tritonclient's JSON mode gives BYTES as str
        item = item.encode("utf-8")
    if content_type == JSON:
        return json.loads(item)
    if content_type:
        return bytes(item)  # a file, an image, bytes of a media type
    return item.decode("utf-8")


def plain_v2(reply: V2Reply, metadata: dict[str, Any]) -> dict[str, Any]:
    """A v2 answer as plain Python: BYTES as text (JSON parsed, binaries of a media
    type as bytes), one-element outputs of shape [1] as their element."""
    shapes = {o["name"]: o["shape"] for o in metadata["outputs"]}
    out: dict[str, Any] = {}
    for name, array in reply.outputs.items():
        content_type = reply.parameters.get(name, {}).get("content_type")
        if array.dtype == object:
            items = [_element(x, content_type) for x in array.reshape(-1)]
            value: Any = items if array.ndim <= 1 else \
                np.array(items, dtype=object).reshape(array.shape).tolist()
        else:
            value = array.tolist()
        single = shapes.get(name) == [1] or (name not in shapes and array.shape == (1,))
        out[name] = value[0] if single and isinstance(value, list) else value
    return out


def plain_native(value: Any) -> Any:
    """A tensorwire client's answer as plain Python (arrays as lists, frames as columns,
    files as their bytes: read them before the client closes)."""
    if isinstance(value, pd.DataFrame):  # a frame is one output per column
        return {str(k): plain_native(v) for k, v in value.to_dict(orient="list").items()}
    if isinstance(value, dict):
        return {k: plain_native(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return value.read_bytes()
    if isinstance(value, list | tuple):
        return [plain_native(v) for v in value]
    return value


def same(a: Any, b: Any) -> bool:
    """Equal plain values; floats to float16 precision (the widest loss on a route)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(
            a, b, rel_tol=1e-3, abs_tol=1e-6)
    return a == b
