"""BentoML's gRPC wire for bench/real_model.py, run with the BentoML venv's Python.

    .venv-bentoml/bin/python -m bench.support.baselines.bentoml_grpc_tool request INDEX
    .venv-bentoml/bin/python -m bench.support.baselines.bentoml_grpc_tool call TARGET INDEX...

`request` prints the serialized `bentoml.grpc.v1.Request` for held-out digit INDEX (hex),
the bytes the load generator sends; `call` asks a running `serve-grpc` server about
held-out digits and prints their labels and probabilities as one JSON line, so the bench
can check that BentoML answers what tensorwire does before it measures anyone.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from examples.digits_model import load_heldout

METHOD = "/bentoml.grpc.v1.BentoService/Call"


def request(index: int) -> bytes:
    from bentoml.grpc.v1 import service_pb2 as pb

    x = load_heldout()[0][index:index + 1]
    array = pb.NDArray(dtype=pb.NDArray.DTYPE_FLOAT, shape=list(x.shape),
                       float_values=x.ravel().tolist())
    return pb.Request(api_name="classify", ndarray=array).SerializeToString()


def decode(array: object) -> np.ndarray:
    from bentoml.grpc.v1 import service_pb2 as pb

    values = {pb.NDArray.DTYPE_FLOAT: array.float_values,  # type: ignore[attr-defined]
              pb.NDArray.DTYPE_INT64: array.int64_values,  # type: ignore[attr-defined]
              pb.NDArray.DTYPE_INT32: array.int32_values,  # type: ignore[attr-defined]
              pb.NDArray.DTYPE_DOUBLE: array.double_values}  # type: ignore[attr-defined]
    return np.asarray(values[array.dtype]).reshape(list(array.shape))  # type: ignore[attr-defined]


def call(target: str, indices: list[int]) -> dict[str, list]:
    import grpc
    from bentoml.grpc.v1 import service_pb2 as pb

    labels, probabilities = [], []
    with grpc.insecure_channel(target) as channel:
        method = channel.unary_unary(METHOD)
        for i in indices:
            reply = pb.Response.FromString(method(request(i), timeout=30))
            fields = reply.multipart.fields
            labels += decode(fields["label"].ndarray).tolist()
            probabilities += decode(fields["probabilities"].ndarray).tolist()
    return {"label": labels, "probabilities": probabilities}


def main(argv: list[str]) -> int:
    if argv[0] == "request":
        print(request(int(argv[1])).hex())
    elif argv[0] == "call":
        print(json.dumps(call(argv[1], [int(i) for i in argv[2:]])))
    else:
        raise SystemExit(__doc__)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
