"""Triton's ModelStreamInfer on streaming APIs, with tritonclient's own stream calls.

Generator APIs are decoupled models (one response per chunk, `triton_final_response`);
an API whose input is a stream takes one request per element, the requests of one
sequence feeding one call; errors are in-band; ModelInfer refuses both.
"""

from __future__ import annotations

import asyncio
import time
import typing as t

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.grpc.aio as tga
from tritonclient.utils import InferenceServerException

from examples.quickstart import Quickstart
from tests.support.servers import serving
from tests.support.stream_services import Streams, ended, seen, server_state, settles
from tests.support.v2_calls import grpc_client, http_client, texts


@pytest.fixture(scope="module")
def streams() -> t.Iterator[t.Any]:
    with serving(Streams) as running:
        yield running


def frames(values: list[float], dtype: t.Any = np.float32) -> list[t.Any]:
    array = np.asarray(values, dtype)
    item = tg.InferInput("frames", list(array.shape), "FP32" if dtype == np.float32
                         else "FP64")
    item.set_data_from_numpy(array)
    return [item]


def exchange(client: tg.InferenceServerClient, sends: list[dict[str, t.Any]],
             cancel: bool = False) -> list[tuple[t.Any, t.Any]]:
    """Start a stream, send each request (async_stream_infer's keywords), stop it:
    what the callback got, in order."""
    got: list[tuple[t.Any, t.Any]] = []
    client.start_stream(callback=lambda result, error: got.append((result, error)))
    for send in sends:
        client.async_stream_infer(**send)
    client.stop_stream(cancel_requests=cancel)
    return got


def final_flag(result: t.Any) -> bool | None:
    params = result.get_response().parameters
    return params["triton_final_response"].bool_param if "triton_final_response" in \
        params else None


def test_a_generator_answers_one_response_per_chunk(servers: t.Any) -> None:
    client = grpc_client(servers[Quickstart])
    word = tg.InferInput("word", [1], "BYTES")
    word.set_data_from_numpy(texts("hey"))
    got = exchange(client, [{"model_name": "spell", "inputs": [word], "request_id": "w1"}])
    assert [e for _, e in got] == [None] * 3
    assert [r.as_numpy("result").tolist() for r, _ in got] == [[b"h"], [b"e"], [b"y"]]
    assert {r.get_response().id for r, _ in got} == {"w1"}
    assert [final_flag(r) for r, _ in got] == [None] * 3  # not asked: Triton sends none
    got = exchange(client, [{"model_name": "spell", "inputs": [word],
                             "enable_empty_final_response": True}])
    assert [final_flag(r) for r, _ in got] == [False, False, False, True]
    assert got[-1][0].get_response().outputs == []  # the empty final response


def test_decoupled_models_say_so_and_model_infer_refuses_them(servers: t.Any,
                                                              streams: t.Any) -> None:
    quick = grpc_client(servers[Quickstart])
    policy = quick.get_model_config("spell", as_json=True)["config"]
    assert policy["model_transaction_policy"] == {"decoupled": True}
    assert quick.get_model_config("summarize", as_json=True)["config"][
        "model_transaction_policy"] == {}  # false: left out of proto3 JSON
    assert http_client(streams).get_model_config("total")[
        "model_transaction_policy"] == {"decoupled": True}
    with pytest.raises(InferenceServerException) as info:
        grpc_client(streams).infer("total", frames([1.0]))
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"
    assert "model 'total' is decoupled (its input is a stream" in str(info.value)
    assert http_client(streams).is_model_ready("total")


def test_a_streamed_input_takes_one_request_per_element(streams: t.Any) -> None:
    client = grpc_client(streams)
    got = exchange(client, [
        {"model_name": "total", "inputs": frames([1, 2]), "request_id": "a"},
        {"model_name": "total", "inputs": frames([3]), "request_id": "b"},
        {"model_name": "total", "inputs": frames([4, 5, 6]), "request_id": "c"},
    ])  # the stream's end ends the sequence's input: one result
    assert [(r.as_numpy("result").tolist(), r.get_response().id, e) for r, e in got] == [
        ([21.0], "c", None)]


def test_sequences_by_id_end_at_sequence_end(streams: t.Any) -> None:
    client = grpc_client(streams)
    got = exchange(client, [
        {"model_name": "total", "inputs": frames([1]), "sequence_id": 7},
        {"model_name": "total", "inputs": frames([100]), "sequence_id": 8},
        {"model_name": "total", "inputs": frames([2]), "sequence_id": 7, "sequence_end": True,
         "request_id": "end7"},
        {"model_name": "total", "inputs": frames([5]), "sequence_id": 7,
         "sequence_start": True},  # a new call under the same id
        {"model_name": "total", "inputs": frames([200]), "sequence_id": 8,
         "sequence_end": True, "enable_empty_final_response": True},
    ])
    results = sorted(r.as_numpy("result").tolist()[0] for r, _ in got)
    assert results == [3.0, 5.0, 300.0]
    first = next(r for r, _ in got if r.as_numpy("result")[0] == 3.0)
    assert first.get_response().id == "end7"


def test_bidirectional_answers_chunks_as_elements_come(streams: t.Any) -> None:
    client = grpc_client(streams)
    got = exchange(client, [{"model_name": "running", "inputs": frames([1, 1]),
                             "enable_empty_final_response": True},
                            {"model_name": "running", "inputs": frames([2, 2])},
                            {"model_name": "running", "inputs": frames([5, 5, 5])}])
    assert [r.as_numpy("result").tolist() if r.get_response().outputs else None
            for r, _ in got] == [[1.0, 1.0], [3.0, 3.0], [5.0, 5.0, 5.0], None]
    assert [final_flag(r) for r, _ in got] == [False, False, False, True]


def test_an_invalid_element_is_an_in_band_error_naming_its_index(streams: t.Any) -> None:
    client = grpc_client(streams)
    got = exchange(client, [
        {"model_name": "running", "inputs": frames([1.0])},
        {"model_name": "running", "inputs": frames([1.0])},
        {"model_name": "running", "inputs": frames([1.0], np.float64)},
        {"model_name": "nope", "inputs": frames([1.0])},
    ])
    answers = [(r.as_numpy("result").tolist() if r is not None else None,
                str(e) if e is not None else None) for r, e in got]
    assert answers[:2] == [([1.0], None), ([2.0], None)]
    errors = sorted(e for _, e in answers[2:])
    assert errors[0].startswith("frames.2: expected dtype float32, got float64")
    assert errors[1].startswith("unknown model 'nope'")


def test_a_stream_stopped_mid_call_cancels_it(streams: t.Any) -> None:
    tag = "v2-stop"
    before = server_state(streams)
    client = grpc_client(streams)
    got: list[t.Any] = []
    client.start_stream(callback=lambda result, error: got.append((result, error)),
                        headers={"x-tag": tag})
    for _ in range(5):
        client.async_stream_infer("slow_sum", frames([1.0]))
    deadline = time.monotonic() + 10
    while seen(tag)["taken"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    client.stop_stream(cancel_requests=True)
    assert ended(tag) == "cancelled"
    settles(streams, before)


def test_the_aio_client_streams_too(streams: t.Any) -> None:
    async def main() -> list[float]:
        client = tga.InferenceServerClient(streams.grpc_target)

        async def requests() -> t.AsyncIterator[dict[str, t.Any]]:
            for value in (1.0, 2.0, 3.0):
                array = np.array([value], np.float32)
                item = tga.InferInput("frames", [1], "FP32")
                item.set_data_from_numpy(array)
                yield {"model_name": "running", "inputs": [item],
                       "sequence_end": value == 3.0}
                await asyncio.sleep(0.01)

        out = []
        async for result, error in client.stream_infer(inputs_iterator=requests()):
            assert error is None
            out.append(result.as_numpy("result").tolist()[0])
            if len(out) == 3:
                break
        await client.close()
        return out

    assert asyncio.run(main()) == [1.0, 3.0, 6.0]
