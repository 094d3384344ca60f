"""Streamed inputs over gRPC: client-streaming and bidirectional rpcs with tensors,
models, text and files; an invalid element, cancellation, a slow model and a slow
reader, limits, deadlines and auth, through raw grpcio calls built from the contract."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

from tensorwire.wire import tensors
from tests.support.grpc_calls import GrpcCaller, error_locs
from tests.support.servers import serving
from tests.support.stream_services import (
    Streams,
    ended,
    gone,
    seen,
    server_state,
    settles,
)

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def server():
    with serving(Streams, max_stream_elements=1000, stream_idle_timeout=2.0) as running:
        yield running


@pytest.fixture
def caller(server):
    with GrpcCaller(server.spec, server.grpc_target) as c:
        yield c


def test_client_streaming_tensors_and_models(caller):
    frames = [np.arange(4, dtype=np.float32), np.ones(1000, np.float32), np.zeros(0, np.float32)]
    assert caller.streamed("total", frames) == 1006.0
    assert caller.streamed("total", []) == 0.0
    summary = caller.streamed("average", [{"sensor": "a", "value": 4},
                                          {"sensor": "b", "value": -2}])
    assert summary == {"count": 2, "mean": 1.0, "sensors": ["a", "b"]}


def test_bidirectional_tensors_models_and_text(caller):
    running = list(caller.replies("running", caller.streamed(
        "running", [np.ones(3, np.float32)] * 3)))
    assert [r.tolist() for r in running] == [[1, 1, 1], [2, 2, 2], [3, 3, 3]]
    scaled = list(caller.replies("scaled", caller.streamed(
        "scaled", [{"sensor": "x", "value": 10}, {"sensor": "y", "value": 3}])))
    assert scaled == [{"sensor": "X", "value": 5.0}, {"sensor": "Y", "value": 1.5}]
    words = list(caller.replies("upper", caller.streamed("upper", ["tensor", "wire"])))
    assert words == ["TENSOR", "WIRE"]


def test_answers_come_while_the_client_still_sends(caller):
    """Bidirectional for real: each reply is read before the next element is sent."""
    gate = threading.Semaphore(0)
    sent = []

    def elements():
        for word in ("one", "two", "three"):
            sent.append(word)
            yield word
            assert gate.acquire(timeout=10), "the reply to the last element never came"

    call = caller.streamed("upper", elements())
    for reply in caller.replies("upper", call):
        assert reply == sent[-1].upper()
        gate.release()
    assert sent == ["one", "two", "three"]


def test_files_land_in_the_calls_temp_dir_which_goes_with_it(caller, tmp_path: Path):
    (tmp_path / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "b.pdf").write_bytes(b"%PDF-1.4 hello")
    files = [tmp_path / "a.bin", tmp_path / "b.pdf"]
    call = caller.streamed("sizes", files, metadata=(("x-tag", "grpc-files"),))
    assert list(caller.replies("sizes", call)) == [10, 14]
    (temp_dir,) = seen("grpc-files")["dirs"]
    assert gone(temp_dir)


def test_an_invalid_element_mid_stream_names_its_index(caller):
    with pytest.raises(grpc.RpcError) as info:
        caller.streamed("average", [{"sensor": "a", "value": 1}, {"sensor": "b", "value": 2},
                                    {"sensor": "c", "value": 101}])
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details().startswith("readings.2.value: ")
    assert error_locs(info.value) == [["readings", 2, "value"]]
    wrong = caller.proto.messages["running"].request_cls()
    tensors.fill(np.ones((2, 2), np.float32), wrong.frames)  # past the client's own check
    call = caller.streamed("running", [np.ones(2, np.float32), wrong])
    replies = []
    with pytest.raises(grpc.RpcError) as info:
        for reply in caller.replies("running", call):
            replies.append(reply)
    assert len(replies) == 1  # the first element was answered before the second failed
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_locs(info.value)[0][:2] == ["frames", 1]


def test_a_message_that_is_not_the_request_type_names_its_index(caller):
    bad = caller.proto.messages["upper"].request_cls(words="ok").SerializeToString() + b"\xff"

    class Raw:  # bytes that are no UpperRequest
        def SerializeToString(self) -> bytes:
            return bad

    call = caller.streamed("upper", ["fine", Raw()])
    with pytest.raises(grpc.RpcError) as info:
        list(call)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "words.1" in info.value.details() and "not a valid" in info.value.details()


def test_a_server_error_mid_stream_is_internal_without_its_detail(caller):
    call = caller.streamed("fails_at", [1, 2, -1, 4])
    got = []
    with pytest.raises(grpc.RpcError) as info:
        for reply in caller.replies("fails_at", call):
            got.append(reply)
    assert got == [1, 2]
    assert info.value.code() == grpc.StatusCode.INTERNAL
    assert "secret" not in info.value.details()


def test_the_method_may_answer_before_the_client_is_done(caller):
    assert caller.streamed("first_two", ["a", "b", "c", "d"]) == "a b"


@pytest.mark.parametrize("api", ["slow_sum", "blocking_sum"])
def test_cancel_mid_stream_leaves_nothing_behind(server, caller, api: str):
    """The client hangs up while the model (async, or a `def` in a thread waiting for
    its next element) works: the call ends on the server, its task, time limit and
    Context with it; the fds and tasks are as before."""
    tag = f"grpc-cancel-{api}"
    before = server_state(server)
    stop = threading.Event()

    def elements():
        while not stop.is_set():
            yield np.ones(8, np.float32)
            time.sleep(0.01)

    messages = caller.proto.messages[api]
    method = caller.channel.stream_unary(caller.proto.method_names[api],
                                         request_serializer=lambda m: m.SerializeToString(),
                                         response_deserializer=messages.response_cls.FromString)
    future = method.future((messages.request({"frames": f}) for f in elements()),
                           timeout=30, metadata=(("x-tag", tag),))
    for _ in range(500):
        if seen(tag)["taken"] >= 3:
            break
        time.sleep(0.01)
    assert seen(tag)["taken"] >= 3
    future.cancel()
    stop.set()
    assert ended(tag) == "cancelled"
    settles(server, before)


def test_a_slow_model_holds_the_client_back(caller, server):
    """Backpressure: elements the model has not taken stay in HTTP/2's bounded
    window, so the client's sender blocks instead of the server buffering its
    stream: 1 MiB elements, 50 ms each to consume."""
    tag = "grpc-slow-model"
    produced = []

    def elements():
        for i in range(200):
            produced.append(i)
            yield np.zeros(MiB // 4, np.float32)  # 1 MiB

    messages = caller.proto.messages["slow_sum"]
    method = caller.channel.stream_unary(caller.proto.method_names["slow_sum"],
                                         request_serializer=lambda m: m.SerializeToString(),
                                         response_deserializer=messages.response_cls.FromString)
    future = method.future((messages.request({"frames": f}) for f in elements()),
                           timeout=60, metadata=(("x-tag", tag),))
    time.sleep(1.5)
    taken = seen(tag)["taken"]
    ahead = len(produced) - taken
    future.cancel()
    assert 10 <= taken <= 40
    assert ahead <= 24, f"{ahead} MiB produced beyond what the model took"


def test_a_slow_reader_holds_the_model_back(caller, server):
    """Backpressure the other way: the generator is paused while its chunks wait for
    a client that reads slowly (256 KiB chunks, flow control, no server-side queue)."""
    tag = "grpc-slow-reader"
    before = server_state(server)
    call = caller.streamed("flood", [400], metadata=(("x-tag", tag),))
    read = 0
    for _ in call:
        read += 1
        if read == 5:
            break
    time.sleep(1.0)
    made = seen(tag)["made"]
    time.sleep(0.5)
    assert seen(tag)["made"] == made  # paused: nothing more made while nothing is read
    # what sits in transit is the transport's: HTTP/2 windows (grpc's BDP probing grows
    # them to 16 MiB under load) and loopback socket buffers (a run on a busy box had 96
    # chunks, 24 MiB, in flight); never the 400 chunks the model would make unchecked
    assert made - read <= 112, f"{made - read} chunks (256 KiB) made beyond what was read"
    call.cancel()
    assert ended(tag) == "cancelled"
    settles(server, before)


def test_more_elements_than_the_limit_is_resource_exhausted(caller):
    with pytest.raises(grpc.RpcError) as info:
        caller.streamed("total", [np.ones(1, np.float32)] * 1001)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "more than 1000 elements" in info.value.details()


def test_a_client_that_stops_sending_ends_with_deadline_exceeded(caller):
    def elements():
        yield np.ones(1, np.float32)
        time.sleep(4)  # past stream_idle_timeout (2 s)
        yield np.ones(1, np.float32)

    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as info:
        caller.streamed("total", elements())
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no element of 'frames' came within 2 s" in info.value.details()
    assert time.monotonic() - began < 4


def test_the_clients_deadline_applies_to_the_whole_stream(caller):
    def elements():
        for _ in range(20):
            yield np.ones(1, np.float32)
            time.sleep(0.05)

    with pytest.raises(grpc.RpcError) as info:
        caller.streamed("total", elements(), timeout=0.3)
    assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_reflection_describes_the_streaming_rpcs(server):
    from google.protobuf import descriptor_pool
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )

    with grpc.insecure_channel(server.grpc_target) as channel:
        pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
        service = pool.FindServiceByName(server.spec.grpc_service_name)
        kinds = {m.name: (m.client_streaming, m.server_streaming) for m in service.methods}
    assert kinds["Total"] == (True, False) and kinds["Running"] == (True, True)


def test_auth_covers_streamed_calls():
    with serving(Streams, auth_token="s3cret") as secured, \
            GrpcCaller(secured.spec, secured.grpc_target) as caller:
        with pytest.raises(grpc.RpcError) as info:
            caller.streamed("total", [np.ones(2, np.float32)])
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as info:
            list(caller.streamed("upper", ["a"]))
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        token = (("authorization", "Bearer s3cret"),)
        assert caller.streamed("total", [np.ones(2, np.float32)], metadata=token) == 2.0
        assert list(caller.replies("upper", caller.streamed("upper", ["a"], metadata=token))) \
            == ["A"]
