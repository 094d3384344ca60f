"""The trained digits CNN through the real server: held-out answers equal offline inference.

Every held-out digit goes through `examples.digits:Digits` over HTTP (JSON and .npy
bodies, multipart images) and gRPC (Tensor, File), one request at a time (batches of
one) and from 64 concurrent clients (batches of many, requests of 1-4 digits). Each
answer must be the label and probabilities that the same weights give offline, to
1e-6: batching must never change an answer.

Batches form only while requests arrive faster than the model answers. This CNN runs a
digit in well under a millisecond, and on a busy machine grpc.aio hands the server one
new call per event-loop turn, about as fast: the concurrent tests would then see
batches of one; an image request (multipart, a temp file, PIL) takes longer still. So
there each forward pass first waits (`paced`: 10 ms for tensors, 50 ms for images), with
the same network and weights, so that calls queue behind it on either protocol as they
do behind a slower model.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson
import pytest
import torch
from PIL import Image

from examples.digits import Digits
from examples.digits_model import WEIGHTS, load_heldout, load_model, predict, preprocess, to_image
from tests.support.grpc_calls import GrpcCaller
from tests.support.http_calls import post
from tests.support.servers import RunningServer, serving
from tests.support.tensor_wire import fill_raw, multipart

pytestmark = pytest.mark.timeout(600)

ATOL = 1e-6
CLIENTS = 64
Answer = tuple[np.ndarray, np.ndarray]  # labels [k], probabilities [k, 10]


@pytest.fixture(scope="module")
def heldout() -> tuple[np.ndarray, np.ndarray]:
    return load_heldout()


@pytest.fixture(scope="module")
def pngs(heldout) -> list[bytes]:
    """Each held-out digit as a 32x32 PNG, the form an image client sends."""
    out = []
    for x in heldout[0]:
        buf = io.BytesIO()
        to_image(x).save(buf, "PNG")
        out.append(buf.getvalue())
    return out


def offline(batch: np.ndarray) -> Answer:
    """The same weights on the CPU in this process, the whole split in one call."""
    labels, probabilities = predict(load_model(WEIGHTS, "cpu"), torch.from_numpy(batch))
    return labels.numpy(), probabilities.numpy()


@pytest.fixture(scope="module")
def offline_tensors(heldout) -> Answer:
    return offline(heldout[0])


@pytest.fixture(scope="module")
def offline_images(pngs) -> Answer:
    return offline(np.stack([preprocess(Image.open(io.BytesIO(p))) for p in pngs]))


@pytest.fixture(scope="module")
def server() -> Iterator[RunningServer]:
    with serving(Digits) as s:
        yield s


@pytest.fixture(scope="module")
def grpc_caller(server) -> Iterator[GrpcCaller]:
    caller = GrpcCaller(server.spec, server.grpc_target)
    yield caller
    caller.close()


class Paused(torch.nn.Module):
    """The served network, each forward pass started `pause` seconds late (GIL released)."""

    def __init__(self, inner: torch.nn.Module, pause: float) -> None:
        super().__init__()
        self.inner, self.pause = inner, pause

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.pause)
        return self.inner(x)


@contextlib.contextmanager
def paced(server: RunningServer, pause: float) -> Iterator[None]:
    """The running service's model made slower for a while, its arithmetic unchanged.

    The batchers' latency budget grows with it: the cap keeps a batch's per-item time
    within max_latency_ms (10 ms), and on a loaded machine the jitter of a 50 ms sleep
    can read as a per-item cost that shrinks the cap to one or two. What these tests
    check is that waiting requests share a model call, not the cap's fit.
    """
    runtime = server.runtime
    instance = runtime.instance
    model = instance.model
    batchers = [runtime.batcher(name) for name, api in server.spec.apis.items()
                if api.batchable]
    budgets = [b.max_latency for b in batchers]
    instance.model = Paused(model, pause)
    for b in batchers:
        b.max_latency = max(b.max_latency, 4 * pause)
    try:
        yield
    finally:
        instance.model = model
        for b, budget in zip(batchers, budgets, strict=True):
            b.max_latency = budget


def answer(value: dict) -> Answer:
    return (np.asarray(value["label"], dtype=np.int64),
            np.asarray(value["probabilities"], dtype=np.float64))


def tensor_call(server: RunningServer, caller: GrpcCaller, wire: str) -> Callable:
    def call(x: np.ndarray) -> Answer:
        if wire == "grpc":
            return answer(caller.call("classify", {"x": x}))
        if wire == "json":
            reply = post(server.http_url + "/classify", orjson.dumps(x.tolist()))
        else:
            buf = io.BytesIO()
            np.save(buf, x)
            reply = post(server.http_url + "/classify", buf.getvalue(),
                         content_type="application/x-npy")
        assert reply.status == 200, reply.body[:500]
        return answer(reply.json())

    return call


def image_call(server: RunningServer, caller: GrpcCaller, wire: str) -> Callable:
    def call(images: list[bytes]) -> Answer:
        if wire == "grpc":
            return answer(caller.call("classify_images", {
                "images": [Image.open(io.BytesIO(p)) for p in images]}))
        body, ctype = multipart([("images", f"d{i}.png", "image/png", p)
                                 for i, p in enumerate(images)])
        reply = post(server.http_url + "/classify_images", body, content_type=ctype)
        assert reply.status == 200, reply.body[:500]
        return answer(reply.json())

    return call


def spans(n: int, sizes: tuple[int, ...]) -> list[slice]:
    """0..n cut into consecutive requests of the given sizes, cycling."""
    out, start, i = [], 0, 0
    while start < n:
        stop = min(n, start + sizes[i % len(sizes)])
        out.append(slice(start, stop))
        start, i = stop, i + 1
    return out


def send_all(call: Callable, inputs, parts: list[slice], clients: int) -> Answer:
    """Every part through `call` (one at a time, or from `clients` threads), in order."""
    if clients == 1:
        results = [call(inputs[s]) for s in parts]
    else:
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda s: call(inputs[s]), parts))
    for s, (labels, probabilities) in zip(parts, results, strict=True):
        k = s.stop - s.start
        assert labels.shape == (k,) and probabilities.shape == (k, 10)
    return (np.concatenate([r[0] for r in results]),
            np.concatenate([r[1] for r in results]))


def batch_sizes_during(server: RunningServer, api: str, run: Callable[[], Answer]
                       ) -> tuple[Answer, list[int]]:
    """`run()`'s answer and the sizes of the model calls it caused (at most 1024 kept)."""
    sizes = server.runtime.batcher(api).stats.batch_sizes
    sizes.clear()  # a bounded deque: a length taken before would stop growing at its cap
    got = run()
    return got, list(sizes)


def same_answers(got: Answer, want: Answer) -> None:
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=ATOL)


@pytest.mark.parametrize("wire", ["json", "npy", "grpc"])
def test_tensors_one_by_one_equal_offline(server, grpc_caller, heldout, offline_tensors, wire):
    x, y = heldout
    call = tensor_call(server, grpc_caller, wire)
    got, sizes = batch_sizes_during(server, "classify", lambda: send_all(
        call, x, spans(len(x), (1,)), clients=1))
    assert sizes and max(sizes) == 1  # one client: every model call ran one digit
    same_answers(got, offline_tensors)
    assert (got[0] == y).mean() >= 0.95


@pytest.mark.parametrize("wire", ["json", "npy", "grpc"])
def test_tensors_concurrent_equal_offline(server, grpc_caller, heldout, offline_tensors, wire):
    x, _ = heldout
    call = tensor_call(server, grpc_caller, wire)
    with paced(server, 0.01):
        got, sizes = batch_sizes_during(server, "classify", lambda: send_all(
            call, x, spans(len(x), (1, 2, 3, 4)), clients=CLIENTS))
    assert max(sizes) > 4, f"{CLIENTS} clients should share model calls: {sizes}"
    same_answers(got, offline_tensors)


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_images_one_by_one_equal_offline(server, grpc_caller, heldout, pngs, offline_images,
                                         wire):
    call = image_call(server, grpc_caller, wire)
    got, sizes = batch_sizes_during(server, "classify_images", lambda: send_all(
        call, pngs, spans(len(pngs), (1,)), clients=1))
    assert sizes and max(sizes) == 1
    same_answers(got, offline_images)
    assert (got[0] == heldout[1]).mean() >= 0.95


@pytest.mark.parametrize("wire", ["http", "grpc"])
def test_images_concurrent_equal_offline(server, grpc_caller, pngs, offline_images, wire):
    call = image_call(server, grpc_caller, wire)
    with paced(server, 0.05):
        got, sizes = batch_sizes_during(server, "classify_images", lambda: send_all(
            call, pngs, spans(len(pngs), (1, 1, 2)), clients=CLIENTS))
    assert max(sizes) > 2, f"{CLIENTS} clients should share model calls: {sizes}"
    same_answers(got, offline_images)


def test_bad_digits_are_client_errors(server, grpc_caller):
    import grpc

    wrong = post(server.http_url + "/classify", orjson.dumps([[[0.0] * 8] * 8]))
    assert wrong.status == 400 and wrong.error_locs() == [["x"]]
    not_image = multipart([("images", "x.png", "image/png", b"not a png at all")])
    reply = post(server.http_url + "/classify_images", not_image[0], content_type=not_image[1])
    assert reply.status in (400, 415) and reply.json()["detail"][0]["loc"][0] == "images"
    api = server.spec.apis["classify"]
    raw = grpc_caller.proto.messages["classify"].request_cls()
    fill_raw(api.root_field.codec, raw, "x", np.zeros((2, 8, 8), np.float32))  # no checks
    with pytest.raises(grpc.RpcError) as info:
        grpc_caller.call("classify", raw=raw)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
