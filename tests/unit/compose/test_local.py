"""In-process dependency calls (`compose.local`) through real runtimes: the callee's
request plan, zero-copy values, propagation, cancellation, batching, failures."""

from __future__ import annotations

import asyncio
import typing as t
from pathlib import Path

import numpy as np
import pytest

from tensorwire.compose.dependency_failures import DependencyFailed
from tensorwire.compose.group import Group
from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.errors import DeadlineExceeded, ServiceUnavailable
from tensorwire.runtime.service import ServiceRuntime
from tensorwire.settings import Settings
from tests.support.composed_services import BATCHES, CANCELLED, SEEN, Item, Model, Pipeline


async def request(runtime: ServiceRuntime, api: str, kwargs: dict[str, t.Any],
                  headers: dict[str, str] | None = None,
                  remaining: float | None = None) -> t.Any:
    """One request to `api` as an envelope makes it: a Context, the plan's run."""
    plan = runtime.plan(api)
    ctx = plan.context(RequestInfo("http", api, Headers(headers or {})))
    try:
        finished, value = plan.run(kwargs, ctx, (lambda: remaining) if remaining else None)
        return value if finished else await value
    finally:
        ctx.close()


@pytest.fixture
async def group() -> t.AsyncIterator[Group]:
    running = await Group(Pipeline, Settings(request_timeout=5)).start()
    try:
        yield running
    finally:
        await running.close()


def rows(n: int = 2, value: float = 1.0) -> np.ndarray:
    return np.full((n, 4), value, np.float32)


async def test_the_dependency_starts_first_and_init_may_call_it(group: Group) -> None:
    assert list(group.runtimes) == [Model, Pipeline]
    assert group.instance(Pipeline).warm == 4.0
    # once started, the handle is a plain attribute of the instance
    assert "model" in vars(group.instance(Pipeline))


@pytest.mark.parametrize("api", ["classify", "classify_async"])
async def test_a_tensor_reaches_the_dependency_as_the_same_object(group: Group,
                                                                  api: str) -> None:
    x = rows()
    out = await request(group.runtime(Pipeline), api, {"x": x})
    assert out.tolist() == [8.0, 8.0]
    assert SEEN["classify"] is x  # no copy, from the pipeline's argument to the model's


async def test_a_model_reaches_the_dependency_as_the_same_instance(group: Group) -> None:
    item = Item(name="apple", weight=2)
    out = await request(group.runtime(Pipeline), "weigh", {"item": item})
    assert SEEN["weigh"] is item
    assert out == Item(name="APPLE", weight=4)


async def test_a_file_out_lives_until_the_calling_request_ends(group: Group,
                                                                tmp_path: Path) -> None:
    doc = tmp_path / "doc.txt"
    doc.write_bytes(b"hello")
    runtime = group.runtime(Pipeline)
    plan = runtime.plan("stamp")
    ctx = plan.context(RequestInfo("http", "stamp", Headers({})))
    finished, value = plan.run({"document": doc}, ctx, None)
    out = value if finished else await value
    assert SEEN["stamp"] == doc
    # written in the calling request's temp dir: readable until that request ends
    assert out.read_bytes() == b"stamped:hello"
    assert out.parent == ctx.temp_dir
    ctx.close()
    assert not out.exists()


async def test_streams_both_kinds(group: Group) -> None:
    runtime = group.runtime(Pipeline)
    assert await request(runtime, "spell", {"word": "abc"}) == ["a", "b", "c"]
    assert await request(runtime, "count", {"n": 4}) == [0, 1, 2, 3]
    assert await request(runtime, "count_first", {"n": 100}) == 0


async def test_a_streamed_input_takes_an_iterable(group: Group) -> None:
    frames = [rows(1, 1.0), rows(2, 2.0)]
    assert await request(group.runtime(Pipeline), "total", {"frames": frames}) == 20.0
    assert all(got is sent for got, sent in zip(SEEN["total"], frames, strict=True))
    with pytest.raises(DependencyFailed, match=r"refused its input: frames\.1"):
        await request(group.runtime(Pipeline), "total",
                      {"frames": [rows(), np.ones((1, 3), np.float32)]})


async def test_the_dependency_refusing_its_input_is_the_pipelines_500(group: Group) -> None:
    with pytest.raises(DependencyFailed) as caught:
        await request(group.runtime(Pipeline), "bad_input", {})
    error = caught.value
    assert error.http_status == 500 and error.public
    assert error.message.startswith("dependency Model.classify refused its input: x:")
    assert "shape" in error.message
    assert error.detail == []  # the model's field locations are not the pipeline's


async def test_the_dependency_failing_is_a_500_naming_it(group: Group) -> None:
    with pytest.raises(DependencyFailed, match=r"^dependency Model.fail failed: ValueError$"):
        await request(group.runtime(Pipeline), "fail", {"why": "secret detail"})


async def test_a_dependency_not_loaded_is_a_503_naming_it(group: Group) -> None:
    group.runtime(Model).ready = False
    with pytest.raises(ServiceUnavailable, match=r"dependency Model\.classify is unavailable"):
        await request(group.runtime(Pipeline), "classify", {"x": rows()})


async def test_the_request_id_and_headers_cross(group: Group) -> None:
    for api in ("seen", "seen_async"):
        seen = await request(group.runtime(Pipeline), api, {},
                             headers={"x-request-id": "req-42", "traceparent": "00-ab-cd-01"})
        assert seen == {"request_id": "req-42", "protocol": "inprocess",
                        "traceparent": "00-ab-cd-01"}


@pytest.mark.parametrize("api", ["seen_stream", "seen_stream_async"])
async def test_a_streams_chunks_call_under_the_requests_frame(group: Group, api: str) -> None:
    plan = group.runtime(Pipeline).plan(api)
    ctx = plan.context(RequestInfo("grpc", api, Headers({"x-request-id": "req-s"})))
    stream = plan.open({"n": 3}, ctx)
    try:
        chunks = [chunk async for chunk in stream.chunks]
    finally:
        await stream.aclose()
        ctx.close()
    assert [c["request_id"] for c in chunks] == ["req-s"] * 3


async def test_leaving_a_stream_cancels_its_dependency_calls(group: Group) -> None:
    CANCELLED["def"].clear()
    plan = group.runtime(Pipeline).plan("wait_stream")
    ctx = plan.context(RequestInfo("http", "wait_stream", Headers({})))
    stream = plan.open({"seconds": 5.0}, ctx)
    first = asyncio.ensure_future(anext(stream.chunks))
    await asyncio.sleep(0.2)
    first.cancel()  # the client left: the transport cancels and closes the stream
    with pytest.raises(asyncio.CancelledError):
        await first
    await stream.aclose()
    ctx.close()
    for _ in range(100):
        if CANCELLED["def"].is_set():
            break
        await asyncio.sleep(0.02)
    assert CANCELLED["def"].is_set()


@pytest.mark.parametrize("api", ["wait", "wait_def"])
async def test_the_requests_deadline_bounds_the_dependency(group: Group, api: str) -> None:
    CANCELLED["async"].clear()
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(DeadlineExceeded):
        await request(group.runtime(Pipeline), api, {"seconds": 5.0}, remaining=0.3)
    assert loop.time() - started < 2.0
    await asyncio.sleep(0.05)
    assert CANCELLED["async"].is_set()  # the model's call was cancelled, not left running


@pytest.mark.parametrize("api, kind", [("wait", "async"), ("wait_def", "async"),
                                       ("wait_in_thread", "def")])
async def test_cancelling_the_request_cancels_the_dependency_call(group: Group, api: str,
                                                                  kind: str) -> None:
    CANCELLED[kind].clear()
    task = asyncio.ensure_future(request(group.runtime(Pipeline), api, {"seconds": 5.0}))
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if CANCELLED[kind].is_set():
            break
        await asyncio.sleep(0.02)
    assert CANCELLED[kind].is_set()


async def test_a_call_in_flight_holds_the_dependencys_runtime(group: Group) -> None:
    """An unload of the model (model control) waits for the pipeline's calls too."""
    model = group.runtime(Model)
    task = asyncio.ensure_future(request(group.runtime(Pipeline), "wait", {"seconds": 5.0}))
    await asyncio.sleep(0.2)
    assert model.calls == 1
    assert not await model.drained(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await model.drained(1.0) and model.calls == 0


async def test_pipeline_calls_batch_with_direct_calls(group: Group) -> None:
    BATCHES.clear()
    pipeline, model = group.runtime(Pipeline), group.runtime(Model)
    first = asyncio.ensure_future(request(model, "batched", {"x": rows(1, 3.0)}))
    await asyncio.sleep(0.01)  # the model is busy with it: the calls below queue up
    calls = [request(pipeline, "batched", {"x": rows(1, 1.0)}) for _ in range(8)]
    calls += [request(model, "batched", {"x": rows(1, 2.0)}) for _ in range(8)]
    results = await asyncio.gather(*calls)
    assert float((await first)[0]) == 30.0
    assert [float(r[0]) for r in results] == [10.0] * 8 + [20.0] * 8
    assert sum(len(b) for b in BATCHES) == 17
    assert any({1.0, 2.0} <= set(batch) for batch in BATCHES), BATCHES


async def test_calls_count_in_the_dependencys_metrics(group: Group) -> None:
    from tensorwire.telemetry.metrics import REQUESTS, flush

    def answered(status: str) -> float:
        flush()
        return REQUESTS.labels("classify", "inprocess", status)._value.get()

    ok, refused = answered("200"), answered("400")
    await request(group.runtime(Pipeline), "classify", {"x": rows()})
    with pytest.raises(DependencyFailed):
        await request(group.runtime(Pipeline), "bad_input", {})
    assert answered("200") == ok + 1  # counted as the model's, protocol `inprocess`
    assert answered("400") == refused + 1  # with the status a request would have got
    series = group.runtime(Model).admission.series("inprocess", "classify")
    assert series is not None and series.in_flight == 0


async def test_a_blocking_call_on_the_event_loop_says_what_to_do(group: Group) -> None:
    with pytest.raises(RuntimeError, match="to_async"):
        await request(group.runtime(Pipeline), "blocking_on_loop", {})


def test_an_inner_context_shares_the_outer_temp_dir_and_cancellation(tmp_path: Path) -> None:
    from tensorwire.compose.local import InnerContext
    from tensorwire.tempdirs import TempDirs

    outer = Context(RequestInfo("http", "a", Headers({})), temp_dirs=TempDirs(str(tmp_path)))
    inner = InnerContext(RequestInfo("inprocess", "b", Headers({})), outer, {})
    assert inner.temp_dir == outer.temp_dir
    inner.close()
    assert outer.temp_dir.exists()  # the inner call's end removes nothing
    assert not inner.cancelled
    outer.cancel()
    assert inner.cancelled
    outer.close()
