"""Streamed inputs through SyncClient and AsyncClient, over gRPC and the WebSocket.

Each call runs on the four (client, protocol) combinations with the elements given as
the caller has them (a list, a generator, an async generator for AsyncClient) and must
give what the method itself gives for the same elements, called in-process.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tensorwire
from examples.streams_in import Transcriber, tones
from tests.support.client_calls import typed
from tests.support.servers import url_of
from tests.support.stream_services import Streams

Elements = Callable[[], list[Any]]


def hello_frames() -> list[np.ndarray]:
    return [f.astype(np.float32) for f in np.array_split(tones("hello wire"), 9)]


#: (id, service, api, keyword of the streamed input (None: the root input), elements)
CALLS: list[tuple[str, type, str, str | None, Elements]] = [
    ("transcribe", Transcriber, "transcribe", "audio", hello_frames),
    ("loudness", Transcriber, "loudness", "audio", hello_frames),
    ("loudness-empty", Transcriber, "loudness", "audio", list),
    ("word-count", Transcriber, "word_count", None,
     lambda: ["streams in", "", "and out again"]),
    ("total", Streams, "total", "frames",
     lambda: [np.arange(5, dtype=np.float32), [1.5, 2.5]]),  # a list converts too
    ("running", Streams, "running", "frames", lambda: [np.ones(3, np.float32)] * 4),
    ("average", Streams, "average", "readings",
     lambda: [{"sensor": "a", "value": 1.5}, {"sensor": "b", "value": -3}]),
    ("scaled", Streams, "scaled", "readings", lambda: [{"sensor": "x", "value": 8}]),
    ("upper", Streams, "upper", None, lambda: ["é", "wörld"]),
    ("first-two", Streams, "first_two", "words", lambda: ["a", "b", "c", "d"]),
]


def direct(service: type, api: str, items: list[Any]) -> Any:
    """What the method gives for `items`, called in-process (validated as the server
    would: through the API's own decoder, element by element)."""
    from tensorwire.contract.decoding import Decoder

    spec = tensorwire.get_service_spec(service).apis[api]
    field = spec.stream_input.name
    validate = Decoder(spec).decode_values
    values = [validate({field: item})[field] for item in items]
    method = getattr(service(), spec.method_name)
    if spec.is_async:
        async def run() -> Any:
            async def source() -> AsyncIterator[Any]:
                for v in values:
                    yield v

            result = method(source())
            if inspect.isasyncgen(result):
                return [chunk async for chunk in result]
            return await result

        result = asyncio.run(run())
    else:
        result = method(iter(values))
        if inspect.isgenerator(result):
            result = list(result)
    return _plain(spec, result)


def _plain(spec: Any, value: Any) -> Any:
    """A result as a client reads it: models as dicts, tensors as arrays."""
    if isinstance(value, list):
        return [_plain(spec, v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


def call(url: str, kind: str, api: str, keyword: str | None, items: list[Any]) -> Any:
    if kind == "sync":
        def gen() -> Iterator[Any]:
            yield from items  # a generator: stepped in a thread by the client

        with tensorwire.SyncClient(url) as client:
            method = getattr(client, api)
            result = method(gen()) if keyword is None else method(**{keyword: gen()})
            info = next(a for a in client.list_apis() if a.name == api)
            return list(result) if info.stream else result

    async def main() -> Any:
        async def agen() -> AsyncIterator[Any]:
            for item in items:
                yield item
                await asyncio.sleep(0)

        async with tensorwire.AsyncClient(url) as client:
            method = getattr(client, api)
            result = method(agen()) if keyword is None else method(**{keyword: agen()})
            info = next(a for a in client.list_apis() if a.name == api)
            if info.stream:
                return [chunk async for chunk in result]
            return await result

    return asyncio.run(main())


def comparable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.tolist())
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    return typed(value)


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize(("case", "service", "api", "keyword", "elements"), CALLS,
                         ids=[c[0] for c in CALLS])
def test_streamed_inputs_answer_as_the_method_does(servers, protocol: str, kind: str,
                                                  case: str, service: type, api: str,
                                                  keyword: str | None, elements: Elements):
    expect = direct(service, api, elements())
    result = call(url_of(servers[service], protocol), kind, api, keyword, elements())
    assert comparable(result) == comparable(expect)


def test_the_transcript_is_heard_right(servers):
    for protocol in ("http", "grpc"):
        with tensorwire.SyncClient(url_of(servers[Transcriber], protocol)) as client:
            partials = list(client.transcribe(audio=iter(hello_frames())))
        assert partials[-1]["text"] == "hello wire"
        assert [p["text"] for p in partials][:3] == ["h", "he", "hel"]
