"""A small pool of gRPC channels that shares calls equally among the server's workers.

A gRPC channel is one HTTP/2 connection, and whatever balances in front of the server
(SO_REUSEPORT across `--workers`, a Kubernetes Service across pods) places connections,
not calls: one channel puts every call on one worker, however many there are. So the
client opens `size` channels, each with a connection of its own (grpc's local subchannel
pool; by default grpc shares one connection among channels to the same target).

The kernel deals connections to workers at random: two workers may hold 3 and 1 of 4
channels. Sending each call to the channel with the fewest calls in flight would then
still give one worker 3/4 of the calls whenever the server is not saturated (measured:
71-75 %). A tensorwire server names the worker behind each connection (initial metadata
of a health Check, `tensorwire.wire.worker_identity`), so the pool groups its channels by worker
and sends each call to the *worker* with the fewest of this client's calls in flight
(ties in turn), then to that worker's least busy channel: every worker holding a
channel gets an equal share of calls, and a slower one gets fewer. The pool asks again
whenever a channel reconnects (the server's max connection age re-deals connections),
by watching the channel's connectivity state. While fewer workers hold channels than
the server has (and the pool could reach), it re-dials the surplus: at once on connect
(nothing runs yet), later in the background with a back-off (a worker that was still
starting, or restarted, when the connections were dealt), closing each replaced channel
once its calls in flight are over. A server that names no worker (another gRPC server)
leaves each channel a group of its own.

A channel whose call was refused unrun (UNAVAILABLE: its worker drains or its connection
broke; RESOURCE_EXHAUSTED: its worker is full) gets no new calls for `AVOID_SECONDS`
while another can take them: a worker that refuses at once has the fewest calls in
flight and would otherwise draw every call, retries included.

Each channel uses grpc's `round_robin` policy: a name that resolves to several addresses
(a headless Kubernetes Service, `dns:///svc.ns.svc.cluster.local:50051`) gets a
connection to every address, and calls take them in turn; a single address behaves as
grpc's default `pick_first` would.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import grpc

from ..wire.worker_identity import WORKER_HEADER, WORKERS_HEADER

#: Channels (connections) a client opens to one target by default: enough that two to
#: four workers or pods behind one address each hold one, few enough to cost nothing
#: (one TCP connection and one HTTP/2 session each, opened on connect).
DEFAULT_CHANNELS = 4
#: Rounds of re-dialing at start when fewer workers hold channels than could.
SPREAD_ROUNDS = 3
#: Seconds before re-dialing in the background, doubling up to SPREAD_RETRY_MAX.
SPREAD_RETRY_FIRST = 0.5
SPREAD_RETRY_MAX = 30.0
#: Seconds a replaced channel's calls in flight get before it closes.
RETIRE_GRACE = 600.0
#: Seconds a channel whose call was refused is passed over (see the module docstring).
AVOID_SECONDS = 2.0
#: Added to an avoided channel's count of calls in flight: more than any real count, so
#: every other channel comes first, and the least avoided one when all are.
_AVOIDED = 1 << 20

#: Channel arguments every pooled channel gets (besides the transport's own).
POOL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.use_local_subchannel_pool", 1),  # a connection of its own per channel
    ("grpc.lb_policy_name", "round_robin"),  # every address of the name, in turn
)
_CHECK = "/grpc.health.v1.Health/Check"
_READY = grpc.ChannelConnectivity.READY


def check_size(size: int) -> int:
    """A valid pool size (`channels=`), or a ValueError that names the option."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"channels must be a positive integer, not {size!r}")
    return size


def _groups(workers: Sequence[str | None]) -> list[list[int]]:
    """Channel indices grouped by worker, in order of first appearance; a channel whose
    worker is unknown is a group of its own."""
    by_worker: dict[str, list[int]] = {}
    out: list[list[int]] = []
    for i, worker in enumerate(workers):
        if worker is None:
            out.append([i])
        elif worker in by_worker:
            by_worker[worker].append(i)
        else:
            by_worker[worker] = [i]
            out.append(by_worker[worker])
    return out


class ChannelPool:
    """`size` grpc.aio channels to one target, their calls in flight and their workers.

    Used on one event loop only (as grpc.aio channels are), so the counts need no lock.
    Every `acquire()` is matched by one `release()` of the index it returned.
    """

    def __init__(self, target: str, size: int = DEFAULT_CHANNELS, *,
                 options: Sequence[tuple[str, Any]] = (),
                 credentials: grpc.ChannelCredentials | None = None,
                 metadata: Sequence[tuple[str, str]] = ()) -> None:
        check_size(size)
        self._target = target
        self._args = [*options, *POOL_OPTIONS]
        self._credentials = credentials
        #: Sent with the pool's own health checks (the client's bearer token).
        self._metadata = tuple(metadata)
        self.channels = [self._dial() for _ in range(size)]
        #: Calls in flight per channel (a stream counts until it ends or is closed), plus
        #: a large constant while the channel is avoided (`avoid`).
        self.in_flight = [0] * size
        #: The worker holding each channel's connection (None: not known).
        self.workers: list[str | None] = [None] * size
        #: How many workers the server says share its port (None: not told).
        self.server_workers: int | None = None
        self._groups = _groups(self.workers)
        self._turn = 0
        self._timeout = 10.0
        #: Every multicallable list handed out, to point at a re-dialed channel.
        self._methods: list[tuple[list[Any], dict[str, Any]]] = []
        self._watchers: dict[int, asyncio.Task[None]] = {}
        self._spreader: asyncio.Task[None] | None = None
        self._retired: dict[asyncio.Task[None], grpc.aio.Channel] = {}
        self._started = False
        self._closed = False

    def _dial(self) -> grpc.aio.Channel:
        if self._credentials is not None:
            return grpc.aio.secure_channel(self._target, self._credentials,
                                           options=self._args)
        return grpc.aio.insecure_channel(self._target, options=self._args)

    def __len__(self) -> int:
        return len(self.channels)

    # ------------------------------------------------------------------ calls
    def acquire(self) -> int:
        """The channel for the next call: the least busy worker's least busy channel
        (counted busy from now on); ties are taken in turn."""
        counts = self.in_flight
        groups = self._groups
        turn = self._turn
        self._turn = turn + 1
        n = len(groups)
        first = turn % n
        best = groups[first]
        low = sum(counts[i] for i in best) if len(best) > 1 else counts[best[0]]
        if low:
            for k in range(1, n):
                group = groups[(first + k) % n]
                load = sum(counts[i] for i in group) if len(group) > 1 else counts[group[0]]
                if load < low:
                    best, low = group, load
                    if not low:
                        break
        if len(best) == 1:
            index = best[0]
        else:
            m = len(best)
            start = (turn // n) % m
            index = best[start]
            for k in range(1, m):
                i = best[(start + k) % m]
                if counts[i] < counts[index]:
                    index = i
        counts[index] += 1
        return index

    def release(self, index: int) -> None:
        self.in_flight[index] -= 1

    def avoid(self, index: int, seconds: float = AVOID_SECONDS) -> None:
        """Pass channel `index` over for `seconds`: its call was refused unrun."""
        self.in_flight[index] += _AVOIDED
        asyncio.get_running_loop().call_later(seconds, self._restore, index)

    def _restore(self, index: int) -> None:
        self.in_flight[index] -= _AVOIDED

    def multicallables(self, method: str, *, stream: bool, request_serializer: Any,
                       response_deserializer: Any, stream_in: bool = False) -> list[Any]:
        """One multicallable of `method` per channel, in channel order (kept current:
        a re-dialed channel's entry is replaced in place); `stream`, `stream_in`: the
        rpc's responses, requests, are streams."""
        spec = {"method": method, "stream": stream, "stream_in": stream_in,
                "request_serializer": request_serializer,
                "response_deserializer": response_deserializer}
        calls = [_multicallable(ch, spec) for ch in self.channels]
        self._methods.append((calls, spec))
        return calls

    # ------------------------------------------------------------------ workers
    async def start(self, timeout: float) -> None:
        """Connect every channel, learn its worker, spread over the server's workers,
        then follow reconnects. A single channel needs none of it."""
        if len(self.channels) < 2:
            return
        self._timeout = timeout
        await asyncio.gather(*(self._identify(i) for i in range(len(self))))
        for _ in range(SPREAD_ROUNDS):  # nothing runs on the channels yet
            surplus = self._surplus()
            if not surplus:
                break
            await self._redial(surplus)
        self._watchers = {i: asyncio.create_task(self._watch(i)) for i in range(len(self))}
        self._started = True
        self._spread_later()

    def _surplus(self) -> list[int]:
        """Channels to re-dial: when fewer workers hold channels than the server has
        (and the pool could reach), every channel beyond the first of its worker."""
        if not self.server_workers or self.server_workers < 2:
            return []
        known = [g for g in self._groups if self.workers[g[0]] is not None]
        if len(known) >= min(self.server_workers, len(self)):
            return []
        return [i for g in known for i in g[1:]]

    async def _redial(self, indices: list[int]) -> None:
        """New connections for channels `indices`; each replaced channel closes once
        its calls in flight are over (RETIRE_GRACE at most)."""
        for i in indices:
            old, new = self.channels[i], self._dial()
            self.channels[i] = new
            for calls, spec in self._methods:
                calls[i] = _multicallable(new, spec)
            self._set_worker(i, None)
            watcher = self._watchers.pop(i, None)
            if watcher is not None:
                watcher.cancel()
            closing = asyncio.create_task(old.close(RETIRE_GRACE))
            self._retired[closing] = old
            closing.add_done_callback(lambda task: self._retired.pop(task, None))
        await asyncio.gather(*(self._identify(i) for i in indices))
        if self._started and not self._closed:
            for i in indices:
                self._watchers[i] = asyncio.create_task(self._watch(i))

    def _spread_later(self) -> None:
        """Re-dial in the background while the pool misses workers (one task at most)."""
        if not self._started or self._closed or not self._surplus():
            return
        if self._spreader is None or self._spreader.done():
            self._spreader = asyncio.create_task(self._spread())

    async def _spread(self) -> None:
        delay = SPREAD_RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            surplus = self._surplus()
            if not surplus:
                return
            await self._redial(surplus)
            delay = min(delay * 2, SPREAD_RETRY_MAX)

    async def _identify(self, index: int) -> None:
        """Ask channel `index` which worker holds its connection (None when the
        server does not say, or the check fails)."""
        channel = self.channels[index]
        call = channel.unary_unary(_CHECK)(b"", timeout=self._timeout,
                                           metadata=self._metadata)
        try:
            metadata = dict(await call.initial_metadata() or ())
            await call
        except grpc.RpcError:
            metadata = {}
        if self.channels[index] is not channel:  # re-dialed meanwhile
            return
        worker = metadata.get(WORKER_HEADER)
        with contextlib.suppress(KeyError, ValueError):
            self.server_workers = int(metadata[WORKERS_HEADER])
        self._set_worker(index, worker if isinstance(worker, str) else None)
        self._spread_later()

    def _set_worker(self, index: int, worker: str | None) -> None:
        if self.workers[index] != worker:
            self.workers[index] = worker
            self._groups = _groups(self.workers)

    async def _watch(self, index: int) -> None:
        """Re-learn channel `index`'s worker each time it reconnects."""
        channel = self.channels[index]
        state = channel.get_state()
        while True:
            await channel.wait_for_state_change(state)
            state = channel.get_state()
            if state is _READY:
                await self._identify(index)
            else:  # reconnecting: a new connection may land on another worker
                self._set_worker(index, None)

    async def close(self) -> None:
        """Close every channel now (calls still in flight are cancelled)."""
        self._closed = True
        retired = list(self._retired.values())
        tasks = [*self._watchers.values(), *self._retired]
        if self._spreader is not None:
            tasks.append(self._spreader)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watchers = {}
        for channel in [*retired, *self.channels]:
            await channel.close()
        self._release()

    def _release(self) -> None:
        """Let go of the closed channels now, on their own loop: the pool's list and
        every multicallable handed out (the lists the APIs hold, emptied in place)."""
        self.channels = []
        for calls, _spec in self._methods:
            calls.clear()
        self._methods = []


def _multicallable(channel: grpc.aio.Channel, spec: dict[str, Any]) -> Any:
    if spec.get("stream_in"):
        make = channel.stream_stream if spec["stream"] else channel.stream_unary
    else:
        make = channel.unary_stream if spec["stream"] else channel.unary_unary
    return make(spec["method"], request_serializer=spec["request_serializer"],
                response_deserializer=spec["response_deserializer"])
