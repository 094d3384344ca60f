"""Triton's `ModelStreamInfer`: one gRPC stream of requests, each answered as its model
answers, through the one gRPC envelope.

- A model that takes one value and returns one answers in order, one response per
  request; an error is in-band (`error_message`) and the stream goes on.
- A *decoupled* model (Triton's term: responses are not one per request):
  - a generator API answers its request with one response per chunk, as the method
    yields them;
  - an API whose input is a stream takes one request per element: the requests of one
    sequence (Triton's `sequence_id` parameter; 0 when none is given) feed one call,
    which starts with the sequence's first request (or one marked `sequence_start`)
    and whose input ends at a request marked `sequence_end` (one without inputs only
    ends it) or when the client ends the stream (`stop_stream`); its answers carry
    the id of the last element's request. An invalid element ends the call with its
    error in-band, located at its index (`frames.3`).
  With `triton_enable_empty_final_response` set on its (first) request, a decoupled
  call's responses carry `triton_final_response`, false, and an empty response with it
  true ends them, as Triton's own decoupled models do (a one-result call's result
  carries it true).
- Backpressure both ways: answers wait in a line of `LINE` for the client to take them
  (past it the calls wait), and a sequence's next element waits until its call took
  the last (past it the stream is not read, and HTTP/2 flow control holds the client).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc

from ..codecs.v2_facet import Tensor
from ..errors import InternalError, TensorwireError
from ..grpc.call_envelope import GrpcRoute
from ..wire.oip import arrays_from_infer_request, params_from_proto
from ..wire.oip.shm_parameters import SHARED_MEMORY_REGION
from .infer_call import InferCall
from .model import V2Model
from .shm_regions import in_decoupled

if TYPE_CHECKING:
    from .servicer import V2Servicer

log = logging.getLogger("tensorwire.v2")

#: Triton's request parameter asking for the final flag, and the flag.
EMPTY_FINAL = "triton_enable_empty_final_response"
FINAL = "triton_final_response"
#: Answers waiting for the client at most.
LINE = 16
_END: Any = object()


class TritonStream:
    """One `ModelStreamInfer` call: its requests read in one task, its answers merged
    into one line that `responses` hands grpc.aio."""

    def __init__(self, servicer: V2Servicer, requests: AsyncIterator[bytes],
                 context: grpc.aio.ServicerContext) -> None:
        self.servicer = servicer
        self.requests = requests
        self.context = context
        self.line: asyncio.Queue[Any] = asyncio.Queue(LINE)
        #: Open sequences of streamed-input models: (model, sequence id) ->.
        self.sequences: dict[tuple[str, Any], Sequence] = {}
        self.calls: set[asyncio.Task[None]] = set()

    async def responses(self) -> AsyncIterator[bytes]:
        reader = asyncio.ensure_future(self._read())
        try:
            while (answer := await self.line.get()) is not _END:
                yield answer
        finally:  # done, or the client left: nothing of the stream goes on
            reader.cancel()
            for call in list(self.calls):
                call.cancel()
            await asyncio.gather(reader, *self.calls, return_exceptions=True)

    async def _read(self) -> None:
        try:
            async for data in self.requests:
                await self._one(data)
            for sequence in list(self.sequences.values()):  # the client is done
                sequence.end()
            if self.calls:
                await asyncio.gather(*self.calls, return_exceptions=True)
        except Exception:
            log.exception("v2 ModelStreamInfer failed")
            await self.line.put(self.servicer.inband(InternalError()))
        await self.line.put(_END)

    async def _one(self, data: bytes) -> None:
        servicer = self.servicer
        try:
            request, raw, model = servicer.parse(data)
        except TensorwireError as exc:
            await self.line.put(servicer.inband(exc))
            return
        params = params_from_proto(request.parameters)
        if model.streams_in:
            await self._element(model, request, params, data)
        elif model.decoupled:
            await self._generate(model, request, raw, params, data)
        else:
            await self.line.put(await servicer.envelope.unary(
                servicer.stream_routes[model.name], data, self.context, InferCall(request, raw),
                inband=servicer.inband))

    async def _generate(self, model: V2Model, request: Any, raw: Any,
                        params: dict[str, Any], data: bytes) -> None:
        """A generator API's call: one answer per chunk (and the final one)."""
        servicer = self.servicer
        final = params.get(EMPTY_FINAL) is True
        route = servicer.chunk_route(model, final=False if final else None)
        failed: list[TensorwireError] = []

        def fail(err: TensorwireError) -> bytes:
            failed.append(err)
            return servicer.inband(err)

        async for answer in servicer.envelope.stream(route, data, self.context,
                                                     InferCall(request, raw), inband=fail):
            await self.line.put(answer)
        if final and not failed:
            await self.line.put(servicer.final_answer(model, request.id))

    async def _element(self, model: V2Model, request: Any, params: dict[str, Any],
                       data: bytes) -> None:
        """One element of a streamed-input model's sequence (a new call if need be)."""
        key = (model.name, params.get("sequence_id", 0))
        sequence = self.sequences.get(key)
        if sequence is not None and params.get("sequence_start") is True:
            sequence.end()  # a new sequence under the same id: the old one's input ends
            sequence = None
        if sequence is None:
            sequence = self.sequences[key] = Sequence(self, model, key,
                                                      params.get(EMPTY_FINAL) is True)
        if request.inputs:  # one without inputs only ends the sequence
            await sequence.put(data)
        if params.get("sequence_end") is True:
            sequence.end()


class Sequence:
    """One call of a streamed-input model: the sequence's requests, one element each,
    as the call's request messages (one waits at most), and the call's answers."""

    def __init__(self, stream: TritonStream, model: V2Model, key: tuple[str, Any],
                 final: bool) -> None:
        self.stream = stream
        self.model = model
        self.key = key
        self.final = final
        self.waiting: deque[bytes] = deque()
        self.ended = False
        #: The request of the last element the call took (its id, its outputs).
        self.last: Any = None
        self._taker: asyncio.Future[None] | None = None
        self._giver: asyncio.Future[None] | None = None
        task = asyncio.ensure_future(self._run())
        stream.calls.add(task)
        task.add_done_callback(stream.calls.discard)

    async def put(self, data: bytes) -> None:
        """Hand an element to the call; wait while the last one was not taken."""
        self.waiting.append(data)
        _wake(self._taker)
        while self.waiting and not self.ended:
            self._giver = asyncio.get_running_loop().create_future()
            await self._giver

    def end(self) -> None:
        """No more elements: the call's input ends once it took those waiting."""
        self.ended = True
        _wake(self._taker)
        _wake(self._giver)
        if self.stream.sequences.get(self.key) is self:
            del self.stream.sequences[self.key]

    async def elements(self) -> AsyncIterator[bytes]:
        while True:
            while not self.waiting:
                if self.ended:
                    return
                self._taker = asyncio.get_running_loop().create_future()
                await self._taker
            data = self.waiting.popleft()
            _wake(self._giver)
            yield data

    def read_element(self, data: bytes, scope: Any) -> dict[str, Any]:
        """One element's request -> the validated arguments of a one-value call."""
        repository = self.stream.servicer.repository
        request, raw, _ = self.stream.servicer.parse(data)
        self.last = request
        if any(SHARED_MEMORY_REGION in t.parameters for t in (*request.inputs,
                                                              *request.outputs)):
            raise in_decoupled(self.model.name)
        arrays = arrays_from_infer_request(request, raw)
        inputs = {i.name: Tensor(i.name, arrays[i.name], params_from_proto(i.parameters))
                  for i in request.inputs}
        return repository.decode(self.model, inputs, [o.name for o in request.outputs],
                                 scope, stream=True)

    async def _run(self) -> None:
        stream, model = self.stream, self.model
        servicer = stream.servicer
        plan = servicer.repository.plan(model.name)
        streams_out = model.api.output.stream
        # a one-result call: its result is the final answer; chunks are not
        final = (not streams_out) if self.final else None

        def read(messages: Any, scope: Any) -> dict[str, Any]:
            return plan.feed(messages, self.read_element, scope)

        def write(result: Any, _: Any) -> bytes:
            return servicer.answer(model, self.last, result, final)

        route = servicer.envelope.route(GrpcRoute(model.name, plan, read, write,
                                                  what=f"v2 {model.name}", timed=True,
                                                  writes_per_request=True))
        failed: list[TensorwireError] = []

        def fail(err: TensorwireError) -> bytes:
            failed.append(err)
            return servicer.inband(err)

        try:
            if streams_out:
                async for answer in servicer.envelope.stream(
                        route, self.elements(), stream.context, inband=fail):
                    await stream.line.put(answer)
                if self.final and not failed:
                    await stream.line.put(servicer.final_answer(
                        model, self.last.id if self.last is not None else ""))
            else:
                await stream.line.put(await servicer.envelope.unary(
                    route, self.elements(), stream.context, inband=fail))
        finally:
            self.end()


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
