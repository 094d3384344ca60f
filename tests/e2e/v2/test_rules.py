"""The native routes' rules hold on the v2 routes: auth, size and time limits, metrics
labelled by model, batching shared with native requests, draining."""

from __future__ import annotations

import asyncio
import threading
import time
import typing as t

import aiohttp
import numpy as np
import pytest
import tritonclient.grpc.aio as tga
from tritonclient.utils import InferenceServerException

from examples.quickstart import Quickstart
from tests.support.ops_http import sample, scrape
from tests.support.servers import serving
from tests.support.v2_calls import MODES, grpc_client, http_client, infer, texts

from . import services
from .services import Tensors

TOKEN = "v2-secret"


def summarize() -> dict[str, np.ndarray]:
    return {"text": texts("a b c"), "max_words": np.array([1])}


def test_auth_covers_infer_and_leaves_the_v2_health_probes_open() -> None:
    with serving(Quickstart, auth_token=TOKEN) as server:
        http, grpc_ = http_client(server), grpc_client(server)
        assert http.is_server_live() and http.is_server_ready()  # probes send no token
        for mode in MODES:
            with pytest.raises(InferenceServerException) as info:
                infer(mode, server, "summarize", summarize())
            assert info.value.status() in ("401", "StatusCode.UNAUTHENTICATED"), mode
            headers = {"authorization": f"Bearer {TOKEN}"}
            reply = infer(mode, server, "summarize", summarize(), headers=headers)
            assert reply.outputs["summary"].tolist() in ([b"a"], ["a"])  # JSON mode: str
        with pytest.raises(InferenceServerException, match="UNAUTHENTICATED"):
            grpc_.get_model_metadata("summarize")
        with pytest.raises(InferenceServerException, match="401"):
            http.get_model_metadata("summarize")


def test_size_and_time_limits() -> None:
    big = np.zeros(64 * 1024, np.float32)  # 256 KiB
    with serving(Tensors, max_request_size=128 * 1024, request_timeout=0.3) as server:
        with pytest.raises(InferenceServerException) as info:
            infer("http-binary", server, "echo", {"x": big})
        assert info.value.status() == "413"
        with pytest.raises(InferenceServerException) as info:
            infer("grpc", server, "echo", {"x": big})
        assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
        for mode, status in (("http-binary", "504"), ("grpc", "StatusCode.DEADLINE_EXCEEDED")):
            with pytest.raises(InferenceServerException) as info:
                infer(mode, server, "slow", {"seconds": np.array([5.0])})
            assert info.value.status() == status
            assert "did not complete within 0.3 s" in info.value.message()
        # a client's shorter deadline wins over the server's limit, as natively
        with pytest.raises(InferenceServerException, match="DEADLINE_EXCEEDED"):
            infer("grpc", server, "slow", {"seconds": np.array([0.25])}, client_timeout=0.05)
        assert infer("grpc", server, "slow", {"seconds": np.array([0.0])}).outputs[
            "result"].tolist() == [b"done"]


def test_metrics_count_v2_requests_by_model() -> None:
    with serving(Quickstart) as server:
        before = scrape(server.http_url)
        for mode in MODES:
            infer(mode, server, "summarize", summarize())
        with pytest.raises(InferenceServerException):
            infer("http-binary", server, "summarize", {"text": texts("a")} | {
                "max_words": np.array([0])})
        with pytest.raises(InferenceServerException):
            infer("http-binary", server, "no-such-model", summarize())
        time.sleep(0.6)  # counts reach prometheus_client within half a second
        after = scrape(server.http_url)

    def delta(**labels: str) -> float:
        name = "tensorwire_requests_total"
        return sample(after, name, missing=0.0, **labels) - sample(before, name, missing=0.0,
                                                                   **labels)

    assert delta(api="summarize", protocol="http", status="200") == 2
    assert delta(api="summarize", protocol="http", status="400") == 1
    assert delta(api="summarize", protocol="grpc", status="OK") == 2
    assert not any(dict(labels).get("api") == "no-such-model" for _, labels in after)


async def test_v2_and_native_requests_share_batches() -> None:
    """While the model is busy, v2 (gRPC aio) and native (HTTP) requests queue up; the
    next batch takes them all, whatever protocol they came by."""
    with serving(Tensors, threads=4) as server:
        services.GATE.clear()
        start = len(services.BATCHES)
        async with aiohttp.ClientSession() as session, \
                tga.InferenceServerClient(f"127.0.0.1:{server.grpc_port}") as client:

            async def native(tag: float) -> list[float]:
                async with session.post(f"{server.http_url}/score",
                                        json={"rows": [[tag, 1.0]]}) as r:
                    assert r.status == 200, await r.text()
                    return await r.json()

            async def v2(tag: float) -> list[float]:
                tensor = tga.InferInput("rows", [1, 2], "FP32")
                tensor.set_data_from_numpy(np.array([[tag, 1.0]], np.float32))
                return (await client.infer("score", [tensor])).as_numpy("result").tolist()

            first = asyncio.ensure_future(native(0.0))  # holds the model at the gate
            while len(services.BATCHES) == start and not _busy(server):
                await asyncio.sleep(0.01)
            rest = [asyncio.ensure_future(native(1.0)) for _ in range(6)] + \
                   [asyncio.ensure_future(v2(2.0)) for _ in range(6)]
            await asyncio.sleep(0.5)  # all twelve queue behind the first
            threading.Thread(target=services.GATE.set).start()
            answers = await asyncio.gather(first, *rest)
    assert answers == [[1.0]] + [[2.0]] * 6 + [[3.0]] * 6
    batches = services.BATCHES[start:]
    assert any({1.0, 2.0} <= set(b) for b in batches), batches


def _busy(server: t.Any) -> bool:
    return server.runtime.admission.in_flight > 0


def test_draining_turns_readiness_off_on_both_protocols() -> None:
    with serving(Quickstart) as server:
        http, grpc_ = http_client(server), grpc_client(server)
        server.runtime.admission.draining = True
        try:
            assert not http.is_server_ready() and not grpc_.is_server_ready()
            assert http.is_server_live() and grpc_.is_server_live()
            assert not http.is_model_ready("summarize")
            with pytest.raises(InferenceServerException) as info:
                infer("grpc", server, "summarize", summarize())
            assert info.value.status() == "StatusCode.UNAVAILABLE"
            with pytest.raises(InferenceServerException) as info:
                infer("http-binary", server, "summarize", summarize())
            assert info.value.status() == "503"
        finally:
            server.runtime.admission.draining = False


def test_unknown_fields_in_a_users_model_are_invalid_argument() -> None:
    """A model input is JSON in a BYTES element: a field its model does not declare is
    refused (400 / INVALID_ARGUMENT naming it), as on the native routes."""
    from examples.models import ReviewAnalyzer

    bad = {"params": texts('{"text": "ok", "stars": 4, "tag": ["a"]}')}
    good = {"params": texts('{"text": "ok", "stars": 4, "tags": ["a"]}')}
    with serving(ReviewAnalyzer) as server:
        for mode, status in (("http-binary", "400"), ("http-json", "400"),
                             ("grpc", "StatusCode.INVALID_ARGUMENT")):
            with pytest.raises(InferenceServerException) as info:
                infer(mode, server, "analyze", bad)
            assert info.value.status() == status, mode
            assert "params.tag" in info.value.message(), info.value
            assert infer(mode, server, "analyze", good).outputs["tags"].tolist() in (
                [b'{"a":1}'], ['{"a":1}']), mode
