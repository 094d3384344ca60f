"""Streamed inputs through tensorwire's clients: the same errors, cancellation, auth
and timeouts over gRPC and the WebSocket."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

import tensorwire
from tensorwire.errors import (
    ClientTimeout,
    InternalError,
    InvalidArgument,
    PayloadTooLarge,
    Unauthenticated,
)
from tests.support.servers import serving, url_of
from tests.support.stream_services import Streams, ended, seen, server_state, settles

PROTOCOLS = ["http", "grpc"]


@pytest.fixture(scope="module")
def server():
    with serving(Streams, max_stream_elements=50) as running:
        yield running


def readings(*values: float) -> list[dict[str, object]]:
    return [{"sensor": f"s{i}", "value": v} for i, v in enumerate(values)]


def test_an_invalid_element_is_the_same_error_on_both_protocols(server):
    errors = {}
    for protocol in PROTOCOLS:
        with tensorwire.SyncClient(url_of(server, protocol)) as client, \
                pytest.raises(InvalidArgument) as info:
            client.average(readings=readings(1, 2, 500))
        errors[protocol] = (type(info.value), info.value.message, info.value.detail)
    assert errors["http"] == errors["grpc"]
    assert errors["grpc"][2] == [{"loc": ["readings", 2, "value"],
                                  "msg": "Input should be less than or equal to 100",
                                  "type": "less_than_equal"}]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_errors_mid_stream_come_after_the_chunks_before_them(server, protocol: str):
    with tensorwire.SyncClient(url_of(server, protocol)) as client:
        got = []
        with pytest.raises(InternalError):
            for n in client.fails_at(numbers=[1, 2, -3, 4]):
                got.append(n)
        assert got == [1, 2]
        with pytest.raises(PayloadTooLarge, match="more than 50 elements"):
            client.total(frames=[np.ones(1, np.float32)] * 51)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_element_the_client_cannot_send_is_its_own_error(server, protocol: str):
    """Caught before it leaves (as a unary input would be), at its element."""
    with tensorwire.SyncClient(url_of(server, protocol)) as client, \
            pytest.raises(InvalidArgument) as info:
        client.total(frames=[np.ones(2, np.float32), np.array(["not", "numbers"])])
    assert "frames" in info.value.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_leaving_a_bidirectional_stream_cancels_the_call(server, protocol: str):
    tag = f"client-leaves-{protocol}"
    before = server_state(server)
    with tensorwire.SyncClient(url_of(server, protocol),
                               headers={"x-tag": tag}) as client:
        stream = client.flood(counts=iter([400]))
        for _ in range(3):
            next(stream)
        stream.close()
    assert ended(tag) == "cancelled"
    settles(server, before)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_async_client_cancelled_mid_stream(server, protocol: str):
    tag = f"async-cancel-{protocol}"
    before = server_state(server)

    async def main() -> None:
        async def frames():
            while True:
                yield np.ones(4, np.float32)
                await asyncio.sleep(0.01)

        async with tensorwire.AsyncClient(url_of(server, protocol),
                                          headers={"x-tag": tag}) as client:
            task = asyncio.ensure_future(client.slow_sum(frames=frames()))
            while seen(tag)["taken"] < 3:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert ended(tag) == "cancelled"
    settles(server, before)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_clients_timeout_covers_the_whole_stream(server, protocol: str):
    def slow():
        for _ in range(50):
            yield np.ones(1, np.float32)
            time.sleep(0.05)

    with tensorwire.SyncClient(url_of(server, protocol), timeout=0.5) as client, \
            pytest.raises(ClientTimeout):
        client.total(frames=slow())


def test_auth_on_both_protocols():
    with serving(Streams, auth_token="s3cret") as secured:
        for protocol in PROTOCOLS:
            with tensorwire.SyncClient(url_of(secured, protocol), token="s3cret") as client:
                assert client.total(frames=[[1.0, 2.0]]) == 3.0
                assert list(client.upper(iter(["a"]))) == ["A"]
        with tensorwire.SyncClient(url_of(secured, "http"), token="s3cret") as client:
            bad = client.with_options(headers={"Authorization": "Bearer nope"})
            with pytest.raises(Unauthenticated):
                bad.total(frames=[[1.0]])


def test_list_apis_says_which_inputs_stream(server):
    for protocol in PROTOCOLS:
        with tensorwire.SyncClient(url_of(server, protocol)) as client:
            infos = {a.name: a for a in client.list_apis()}
        assert infos["total"].stream_in and not infos["total"].stream
        assert infos["running"].stream_in and infos["running"].stream
        with pytest.raises(TypeError, match="takes a stream as 'frames'"):
            tensorwire.SyncClient(url_of(server, protocol)).total(frames="not a stream")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_server_that_fails_while_the_client_still_sends_keeps_its_chunks_and_error(
        server, protocol: str):
    """The server fails at -3 while the client, reading slowly, still has 4 to send: the
    chunk made before the failure and the server's own error both reach the caller (a
    gRPC write failing on the ended call had dropped the unread chunk 2 and put grpc's
    'Internal error from Core' in place of the server's answer)."""
    async def main() -> tuple[list[int], InternalError]:
        async def numbers():
            for n in (1, 2, -3):
                yield n
            await asyncio.sleep(0.1)  # by now the server has ended the call
            yield 4

        got: list[int] = []
        async with tensorwire.AsyncClient(url_of(server, protocol)) as client:
            with pytest.raises(InternalError) as info:
                async for n in client.fails_at(numbers=numbers()):
                    got.append(n)
                    await asyncio.sleep(0.3)  # read on once 4 has been written, or tried
        return got, info.value

    got, error = asyncio.run(main())
    assert got == [1, 2]
    assert error.message == "Internal server error"  # the server's, its detail kept back
    if protocol == "grpc":
        assert getattr(error, "request_id", None)  # answered by the server, not by grpc
