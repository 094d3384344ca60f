"""Raw tensor bytes cut out of a ModelInferRequest as views, appended to a response."""

from __future__ import annotations

import numpy as np
import pytest

from tensorwire import inference as pb
from tensorwire.v2.raw_contents import (
    SPLIT_MIN,
    join_raw_outputs,
    length_delimited,
    split_raw_inputs,
)


def request(*payloads: bytes) -> bytes:
    msg = pb.ModelInferRequest(model_name="m", id="7")
    for i, p in enumerate(payloads):
        msg.inputs.add(name=f"x{i}", datatype="UINT8", shape=[len(p)])
    msg.outputs.add(name="y")
    msg.raw_input_contents.extend(payloads)
    return msg.SerializeToString()


def test_big_requests_lose_their_raw_inputs_to_views_of_the_buffer() -> None:
    big = np.random.default_rng(0).integers(0, 255, SPLIT_MIN, dtype=np.uint8).tobytes()
    data = request(b"abc", big, b"")
    head, raws = split_raw_inputs(data)
    assert raws is not None and [bytes(r) for r in raws] == [b"abc", big, b""]
    assert all(r.obj is data for r in raws)  # views, not copies
    parsed = pb.ModelInferRequest.FromString(head)
    assert (parsed.model_name, parsed.id, len(parsed.raw_input_contents)) == ("m", "7", 0)
    assert [i.name for i in parsed.inputs] == ["x0", "x1", "x2"]
    assert [o.name for o in parsed.outputs] == ["y"]


def test_small_requests_and_requests_without_raw_inputs_stay_whole() -> None:
    small = request(b"abc")
    assert split_raw_inputs(small) == (small, None)
    typed = pb.ModelInferRequest(model_name="m" * SPLIT_MIN).SerializeToString()
    assert split_raw_inputs(typed) == (typed, None)


def test_malformed_framing_is_a_value_error() -> None:
    data = request(b"x" * SPLIT_MIN)
    with pytest.raises(ValueError):
        split_raw_inputs(data[:-10])


def test_appended_raw_outputs_parse_as_protobuf_writes_them() -> None:
    response = pb.ModelInferResponse(model_name="m")
    response.outputs.add(name="y", datatype="FP32", shape=[2])
    payload = np.array([1.5, 2.5], "<f4")
    joined = join_raw_outputs(response.SerializeToString(),
                              [memoryview(payload).cast("B"), b"tail"])
    expected = pb.ModelInferResponse()
    expected.CopyFrom(response)
    expected.raw_output_contents.extend([payload.tobytes(), b"tail"])
    assert pb.ModelInferResponse.FromString(joined) == expected
    wrapped = pb.ModelStreamInferResponse.FromString(length_delimited(2, joined))
    assert wrapped.infer_response == expected
