"""Handles (`self.model`): BentoML's call forms, the failure mapping, the call frame,
and an instance made by hand outside any server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import typing as t

import numpy as np
import pytest

from tensorwire.compose.dependency_failures import DependencyFailed, dependency_error
from tensorwire.compose.group import Group
from tensorwire.compose.handles import Deferred, ServiceHandle
from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.errors import (
    Cancelled,
    ClientTimeout,
    DeadlineExceeded,
    InternalError,
    InvalidArgument,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    ServerUnreachable,
    ServiceUnavailable,
    Unauthenticated,
)
from tensorwire.runtime.call_frame import CallFrame
from tests.support.composed_services import Pipeline
from tests.support.servers import ROOT


@pytest.fixture
async def handle() -> t.AsyncIterator[ServiceHandle]:
    group = await Group(Pipeline).start()
    try:
        yield group.instance(Pipeline).model
    finally:
        await group.close()


async def test_the_forms_of_a_call(handle: ServiceHandle) -> None:
    x = np.ones((1, 4), np.float32)
    # natural form, an async callee: awaitable; a def callee from a thread: blocking
    assert (await handle.weigh(item={"name": "a"})).name == "A"
    assert (await asyncio.to_thread(handle.classify, x=x)).tolist() == [4.0]
    # forced forms, from their places
    assert (await handle.to_async.classify(x=x)).tolist() == [4.0]
    assert (await asyncio.to_thread(lambda: handle.to_sync.weigh(item={"name": "b"}))
            ).name == "B"
    assert [c async for c in handle.to_async.count(n=3)] == [0, 1, 2]
    assert await asyncio.to_thread(lambda: list(handle.to_sync.spell(word="hi"))) == [
        "h", "i"]
    # arguments bind as the method's do: positional in order, then by name
    with pytest.raises(TypeError, match="takes at most 1 positional argument"):
        await asyncio.to_thread(lambda: handle.classify(x, x))
    with pytest.raises(TypeError, match="unexpected input 'y'"):
        await handle.to_async.classify(y=x)


async def test_unknown_apis_are_named(handle: ServiceHandle) -> None:
    with pytest.raises(AttributeError, match="has no API 'clasify'; it has: classify"):
        handle.clasify  # noqa: B018
    assert "classify" in dir(handle) and "count" in dir(handle.to_async)
    assert repr(handle) == "<dependency Model (LocalBackend)>"


async def test_a_url_only_dependency_answers_in_the_form_of_its_place() -> None:
    from tensorwire.compose.remote import RemoteBackend

    handle = ServiceHandle(RemoteBackend("ranker", "grpc://127.0.0.1:1"),
                           asyncio.get_running_loop())
    assert isinstance(handle.rank(query="q"), Deferred)  # on the loop: awaitable
    with pytest.raises(ServiceUnavailable, match="dependency ranker is down"):
        await handle.to_async.rank(query="q")


@pytest.mark.parametrize("error, kind, status, message", [
    (InvalidArgument.at(["x"], "bad shape"), DependencyFailed, 500,
     "dependency M.f refused its input: x: bad shape"),
    (PayloadTooLarge("too big"), DependencyFailed, 500, "dependency M.f refused its input"),
    (Overloaded("busy", headers={"Retry-After": "2"}), Overloaded, 503,
     "dependency M.f is overloaded: busy"),
    (ServiceUnavailable("draining"), ServiceUnavailable, 503,
     "dependency M.f is unavailable: draining"),
    (ServerUnreachable("cannot connect"), ServiceUnavailable, 503,
     "dependency M.f is down: cannot connect"),
    (DeadlineExceeded("late"), DeadlineExceeded, 504, "dependency M.f did not answer in time"),
    (ClientTimeout("late"), DeadlineExceeded, 504, "dependency M.f did not answer in time"),
    (InternalError(), DependencyFailed, 500, "dependency M.f failed: Internal server error"),
    (Unauthenticated("no token"), DependencyFailed, 500, "(Unauthenticated): no token"),
    (NotFound("no API f"), DependencyFailed, 500, "(NotFound): no API f"),
    (KeyError("k"), DependencyFailed, 500, "dependency M.f failed: KeyError"),
])
def test_the_failure_mapping(error: Exception, kind: type, status: int, message: str) -> None:
    mapped = dependency_error("M.f", error)
    assert type(mapped) is kind
    assert mapped.http_status == status  # type: ignore[attr-defined]
    assert message in mapped.message and mapped.public  # type: ignore[attr-defined]
    assert not mapped.detail  # type: ignore[attr-defined]
    if isinstance(error, Overloaded):
        assert mapped.headers == {"Retry-After": "2"}  # type: ignore[attr-defined]


def test_a_cancellation_goes_on_unmapped() -> None:
    cancelled = asyncio.CancelledError()
    assert dependency_error("M.f", cancelled) is cancelled
    own = Cancelled()
    assert dependency_error("M.f", own) is own


async def test_the_call_frame() -> None:
    loop = asyncio.get_running_loop()
    ctx = Context(RequestInfo("grpc", "f", Headers({"x-request-id": "r1"})))
    frame = CallFrame(ctx, 10.0, loop)
    assert 9.0 < frame.remaining() <= 10.0  # type: ignore[operator]
    assert frame.info.id == "r1"
    assert CallFrame(ctx, None, loop).remaining() is None
    assert CallFrame(ctx, 0.0, loop).remaining() == 0.0
    inner = loop.create_future()
    forget = frame.attach(inner)
    other = loop.create_future()
    frame.attach(other)
    forget()
    frame.cancel()
    assert not inner.cancelled() and other.cancelled()  # a forgotten one is left alone
    with pytest.raises(Cancelled):
        frame.check()


def test_an_instance_made_by_hand_gets_its_dependencies() -> None:
    """Outside any server, as BentoML's do: placed in-process on first use."""
    code = textwrap.dedent("""
        import asyncio
        import numpy as np
        from tests.support.composed_services import Pipeline

        pipeline = Pipeline()          # __init__ calls the model already
        print(pipeline.warm)
        print(pipeline.classify(np.ones((2, 4), np.float32)).tolist())
        print(pipeline.count(3))
        print(asyncio.run(pipeline.spell("ok")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[:4] == ["4.0", "[8.0, 8.0]", "[0, 1, 2]", "['o', 'k']"]
