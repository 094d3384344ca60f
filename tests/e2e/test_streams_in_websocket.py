"""Streamed inputs over HTTP: the API's WebSocket, with a raw aiohttp client.

One message per element in (JSON text, `.npy` or file bytes as binary, an empty binary
message to end), one message per result out, errors as close codes with a JSON reason;
cancellation, a slow model and a slow reader, limits, auth and the non-upgrade answer.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import numpy as np
import pytest

from tensorwire.wire import npy
from tests.support.servers import serving
from tests.support.stream_services import (
    Streams,
    ended,
    gone,
    seen,
    server_state,
    settles,
)

END = b""  # an empty binary message ends the stream
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def server():
    with serving(Streams, max_stream_elements=1000, stream_idle_timeout=2.0,
                 max_request_size=4 * MiB) as running:
        yield running


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def collect(url: str, *sends: Any, headers: dict[str, str] | None = None
                  ) -> tuple[list[Any], int | None, dict[str, Any]]:
    """(the messages' data, the close code, the close reason as JSON)."""
    async with aiohttp.ClientSession() as session, session.ws_connect(
            url, headers=headers, protocols=("tensorwire",)) as ws:
        for item in sends:
            try:
                await (ws.send_str(item) if isinstance(item, str) else ws.send_bytes(item))
            except ConnectionError:  # the server closed first: its close says why
                break
        data = []
        while True:
            msg = await ws.receive()
            if msg.type in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                data.append(msg.data)
                continue
            if msg.type is aiohttp.WSMsgType.CLOSE:  # the server's close frame itself
                return data, msg.data, json.loads(msg.extra) if msg.extra else {}
            return data, ws.close_code, {}


def url(server: Any, api: str) -> str:
    return f"{server.http_url}/{api}"


def test_client_streaming_text_and_binary_elements(server):
    data, code, _ = run(collect(url(server, "total"), "[1, 2, 3]",
                                npy.write(np.full(4, 0.5, np.float32)), END))
    assert (data, code) == (["8.0"], 1000)
    data, code, _ = run(collect(url(server, "total"), END))  # an empty stream
    assert (data, code) == (["0.0"], 1000)
    data, code, _ = run(collect(url(server, "average"), '{"sensor": "a", "value": 4}',
                                '{"sensor": "b", "value": 2}', END))
    assert json.loads(data[0]) == {"count": 2, "mean": 3.0, "sensors": ["a", "b"]}


def test_bidirectional_messages_answer_as_they_come(server):
    async def go() -> None:
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url(server, "upper"), protocols=("tensorwire",)) as ws:
            assert ws.protocol == "tensorwire"
            for word in ("tensor", "wire"):
                await ws.send_str(word)  # a str element: its text, no JSON quotes
                assert (await ws.receive()).data == word.upper()
            await ws.send_bytes(END)
            assert (await ws.receive()).type is aiohttp.WSMsgType.CLOSE
            assert ws.close_code == 1000
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url(server, "running"), headers={"Accept": "application/x-npy"}) as ws:
            for _ in range(3):
                await ws.send_bytes(npy.write(np.ones(2, np.float32)))
                msg = await ws.receive()
                assert msg.type is aiohttp.WSMsgType.BINARY  # .npy, as Accept asked
            assert npy.read(msg.data, None).tolist() == [3.0, 3.0]
            await ws.send_str("[1, 1]")  # a text element beside binary ones
            assert npy.read((await ws.receive()).data, None).tolist() == [4.0, 4.0]

    run(go())
    data, code, _ = run(collect(url(server, "running"), "[1, 2]", "[1, 2]", END))
    assert [json.loads(d) for d in data] == [[1.0, 2.0], [2.0, 4.0]] and code == 1000
    data, code, _ = run(collect(url(server, "scaled"), '{"sensor": "x", "value": 10}', END))
    assert json.loads(data[0]) == {"sensor": "X", "value": 5.0}


def test_file_elements_land_in_the_calls_temp_dir_which_goes(server):
    data, code, _ = run(collect(url(server, "sizes"), b"x" * 10, b"%PDF-1.4 hi", END,
                                headers={"x-tag": "ws-files"}))
    assert (data, code) == (["10", "11"], 1000)
    (temp_dir,) = seen("ws-files")["dirs"]
    assert gone(temp_dir)


def test_an_invalid_element_closes_1007_naming_its_index(server):
    data, code, reason = run(collect(url(server, "average"), '{"sensor": "a", "value": 1}',
                                     '{"sensor": "b", "value": 101}', END))
    assert data == [] and code == 1007
    assert reason["status"] == 400
    assert reason["error"].startswith("readings.1.value: ")
    data, code, reason = run(collect(url(server, "running"), "[1, 2]", "[[1, 2]]", END))
    assert len(data) == 1 and code == 1007  # element 0 was answered first
    assert reason["error"].startswith("frames.1: ")
    data, code, reason = run(collect(url(server, "total"), "not json", END))
    assert code == 1007 and reason["error"].startswith("frames.0: ")


def test_a_binary_message_is_the_elements_binary_form(server):
    """A binary message for a tensor is a `.npy`: other bytes are invalid data."""
    _, code, reason = run(collect(url(server, "total"), b"\x00\x01 not npy", END))
    assert code == 1007 and reason["status"] == 400
    assert reason["error"].startswith("frames.0: ")


def test_a_server_error_closes_1011_without_its_detail(server):
    data, code, reason = run(collect(url(server, "fails_at"), "1", "2", "-1", END))
    assert data == ["1", "2"] and code == 1011
    assert reason["status"] == 500 and "secret" not in reason["error"]


def test_the_method_may_answer_before_the_client_is_done(server):
    data, code, _ = run(collect(url(server, "first_two"), "a", "b", "c"))
    assert (data, code) == (["a b"], 1000)


def test_limits_close_1009_and_1011(server):
    """A message over max_request_size (aiohttp refuses it as it reads its header),
    more elements than max_stream_elements, a client silent past
    stream_idle_timeout."""
    big = npy.write(np.zeros(2 * MiB, np.float32))  # 8 MiB > max_request_size (4 MiB)
    _, code, _ = run(collect(url(server, "total"), "[1]", big, END))
    assert code == 1009
    many = ["[1]"] * 1001
    _, code, reason = run(collect(url(server, "total"), *many, END))
    assert code == 1009 and "more than 1000 elements" in reason["error"]

    async def idle() -> tuple[int | None, dict[str, Any], float]:
        began = time.monotonic()
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url(server, "total")) as ws:
            await ws.send_str("[1]")
            msg = await ws.receive(timeout=10)  # the server gives up first (2 s)
            return ws.close_code, json.loads(msg.extra), time.monotonic() - began

    code, reason, took = run(idle())
    assert code == 1011 and reason["status"] == 504 and took < 5
    assert "no element of 'frames' came within 2 s" in reason["error"]


@pytest.mark.parametrize("api", ["slow_sum", "blocking_sum"])
def test_cancel_mid_stream_leaves_nothing_behind(server, api: str):
    tag = f"ws-cancel-{api}"
    before = server_state(server)

    async def go() -> None:
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url(server, api), headers={"x-tag": tag}) as ws:
            while seen(tag)["taken"] < 3:
                await ws.send_str("[1, 1]")
                await asyncio.sleep(0.01)
            # leaving the block closes the socket: the client hangs up mid-stream

    run(go())
    assert ended(tag) == "cancelled"
    settles(server, before)


def test_a_slow_model_holds_the_client_back(server):
    """Messages the model has not taken stay in aiohttp's bounded reader, which pauses
    the socket: the client's sends block (1 MiB elements, 50 ms each to consume)."""
    tag = "ws-slow-model"
    frame = npy.write(np.zeros(MiB // 4, np.float32))
    sent = 0

    async def go() -> None:
        nonlocal sent
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url(server, "slow_sum"), headers={"x-tag": tag}) as ws:
            async def send() -> None:
                nonlocal sent
                for _ in range(300):
                    await ws.send_bytes(frame)
                    sent += 1

            sender = asyncio.ensure_future(send())
            await asyncio.sleep(1.5)
            sender.cancel()

    run(go())
    taken = seen(tag)["taken"]
    # ~30 taken in the 1.5 s (more while the close is on its way, on a busy box);
    # what matters is how far the sender got beyond them
    assert taken >= 10
    assert sent < 300
    assert sent - taken <= 24, f"{sent - taken} MiB sent beyond what the model took"


def test_a_slow_reader_holds_the_model_back(server):
    tag = "ws-slow-reader"
    before = server_state(server)

    async def go() -> int:
        async with aiohttp.ClientSession() as session, session.ws_connect(
                url(server, "flood"), headers={"x-tag": tag}) as ws:
            await ws.send_str("400")
            for _ in range(5):
                await ws.receive()
            await asyncio.sleep(1.0)
            return seen(tag)["made"]

    made = run(go())
    assert made - 5 <= 48, f"{made - 5} chunks (256 KiB) made beyond what was read"
    assert ended(tag) == "cancelled"
    settles(server, before)


def test_a_request_that_is_no_upgrade_is_426(server):
    async def go() -> tuple[int, dict[str, Any], str | None]:
        async with aiohttp.ClientSession() as session:
            for method in ("post", "get"):
                async with getattr(session, method)(url(server, "total")) as resp:
                    body = await resp.json()
                    assert resp.status == 426, method
            return resp.status, body, resp.headers.get("Upgrade")

    _, body, upgrade = run(go())
    assert upgrade == "websocket" and "open a WebSocket" in body["error"]


def test_metrics_and_access_count_websocket_calls(server):
    """A WebSocket call is one request in the metrics: its status is the error
    model's (200 for a clean close), its bytes the messages'."""
    import urllib.request

    run(collect(url(server, "upper"), "abc", END))
    run(collect(url(server, "upper"), b"\xff\xfe", END))  # not UTF-8: 400
    server.runtime.admission.flush()
    text = urllib.request.urlopen(server.http_url + "/metrics").read().decode()
    lines = [line for line in text.splitlines()
             if line.startswith("tensorwire_requests_total") and 'api="upper"' in line
             and 'protocol="http"' in line]
    assert any('status="200"' in line for line in lines), lines
    assert any('status="400"' in line for line in lines), lines


def test_auth_by_header_or_subprotocol_else_close_1008():
    with serving(Streams, auth_token="s3cret") as secured:
        target = url(secured, "total")
        data, code, reason = run(collect(target, "[1]", END))
        assert code == 1008 and reason["status"] == 401
        data, code, _ = run(collect(target, "[1]", END,
                                    headers={"Authorization": "Bearer s3cret"}))
        assert (data, code) == (["1.0"], 1000)

        async def browser_like() -> tuple[list[Any], int | None, str | None]:
            async with aiohttp.ClientSession() as session, session.ws_connect(
                    target, protocols=("tensorwire", "bearer.s3cret")) as ws:
                await ws.send_str("[2]")
                await ws.send_bytes(END)
                got = [m.data async for m in ws]
                return got, ws.close_code, ws.protocol

        got, code, protocol = run(browser_like())
        assert (got, code, protocol) == (["2.0"], 1000, "tensorwire")  # never the token

        async def wrong_subprotocol() -> int | None:
            async with aiohttp.ClientSession() as session, session.ws_connect(
                    target, protocols=("tensorwire", "bearer.nope")) as ws:
                await ws.receive()
                return ws.close_code

        assert run(wrong_subprotocol()) == 1008


def test_a_draining_server_closes_1013(server):
    """Refused before the call begins, as a POST would be 503: browsers see the code."""
    server.runtime.admission.draining = True
    try:
        data, code, reason = run(collect(url(server, "total"), "[1]", END))
    finally:
        server.runtime.admission.draining = False
    assert (data, code, reason["status"]) == ([], 1013, 503)
    assert "shutting down" in reason["error"]
