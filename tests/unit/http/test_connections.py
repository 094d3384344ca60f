"""HTTP connection limits (`tensorwire.http.connections`): settings and the answers
written to connections refused before any request was read."""

from __future__ import annotations

import logging

import orjson
import pytest

from tensorwire.http.connections import ConnectionGuard
from tensorwire.settings import Settings


@pytest.mark.parametrize("name", ["header_timeout", "http_body_timeout",
                                  "http_keepalive_timeout", "max_connections",
                                  "grpc_max_connection_idle", "grpc_max_concurrent_streams"])
def test_negative_limits_are_refused(name):
    with pytest.raises(ValueError, match=f"{name} must not be negative"):
        Settings(**{name: -1}).validate()


def test_guard_answers_are_whole_responses_that_close():
    guard = ConnectionGuard.from_settings(Settings(max_connections=7, retry_after=4,
                                                   header_timeout=2.5))
    for raw, status, text in ((guard.busy, b"503", "at most 7"),
                              (guard.late, b"408", "within 2.5 s")):
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0].split(b" ")[1] == status
        assert b"Connection: close" in lines
        assert f"Content-Length: {len(body)}".encode() in lines
        assert text in orjson.loads(body)["error"]
    assert b"Retry-After: 4" in guard.busy


def test_refusals_are_logged_once_per_interval(caplog):
    guard = ConnectionGuard.from_settings(Settings(max_connections=1))
    with caplog.at_level(logging.WARNING, logger="tensorwire.http"):
        for i in range(50):
            guard.refuse(now=100.0 + i * 0.1)  # 5 s of refusals
        guard.refuse(now=111.0)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["refused 1 connection(s): max_connections (1 per worker) are open",
                     "refused 50 connection(s): max_connections (1 per worker) are open"]


class _Pooled:
    """What `make_room` reads of a connection: since when it is idle (None: busy)."""

    def __init__(self, idle: float | None) -> None:
        self.idle = idle
        self.closed = False

    def _idle_since(self) -> float | None:
        return None if self.closed else self.idle

    def force_close(self) -> None:
        self.closed = True


def test_at_the_cap_the_longest_idle_connection_is_closed_and_busy_ones_never():
    guard = ConnectionGuard.from_settings(Settings(max_connections=4))
    busy, late, early, newcomer = _Pooled(None), _Pooled(80.0), _Pooled(75.0), _Pooled(1.0)
    guard.connections.update((busy, late, early, newcomer))
    assert guard.make_room(newcomer, now=100.0)
    assert (early.closed, late.closed, busy.closed, newcomer.closed) == (
        True, False, False, False)
    assert guard.make_room(newcomer, now=100.0) and late.closed
    assert not guard.make_room(newcomer, now=100.0)  # only busy ones left: refuse
    assert not busy.closed and not newcomer.closed


class _Handler:
    """What the sweeper reads of a connection: its head deadline, and what it calls."""

    def __init__(self, due: float) -> None:
        self._head_due = due
        self.late = False

    def _head_late(self) -> None:
        self.late = True


def test_one_sweeper_closes_only_late_heads_and_stops_when_none_is_due():
    import asyncio

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        guard = ConnectionGuard.from_settings(Settings(header_timeout=0.1))
        assert guard.tick == 0.01
        late, in_time = _Handler(loop.time() + 0.03), _Handler(loop.time() + 60)
        guard.arm(late, loop)
        guard.arm(in_time, loop)  # one timer for both
        await asyncio.sleep(0.1)
        assert late.late and not in_time.late
        assert guard._due == {in_time} and guard._sweeper is not None
        guard.disarm(in_time)
        await asyncio.sleep(0.05)
        assert guard._sweeper is None  # idle: nothing is due, nothing wakes the loop

    asyncio.run(scenario())
