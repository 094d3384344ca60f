"""The client's channel pool: which channel a call goes to (no server needed: the
channels are created but never connect)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tensorwire.client.channels import DEFAULT_CHANNELS, ChannelPool, check_size

TARGET = "127.0.0.1:9"  # never dialed: nothing here makes a call


def placed(pool: ChannelPool, *workers: str | None) -> ChannelPool:
    """The pool as if its channels' connections were held by these workers."""
    for i, worker in enumerate(workers):
        pool._set_worker(i, worker)
    return pool


async def test_one_call_at_a_time_takes_the_channels_in_turn():
    pool = ChannelPool(TARGET, 4)
    try:
        order = []
        for _ in range(8):
            i = pool.acquire()
            order.append(i)
            pool.release(i)
        assert order == [0, 1, 2, 3, 0, 1, 2, 3]
        assert pool.in_flight == [0, 0, 0, 0]
    finally:
        await pool.close()


async def test_calls_in_flight_go_to_the_least_busy_channel():
    pool = ChannelPool(TARGET, 3)
    try:
        held = [pool.acquire() for _ in range(6)]
        assert pool.in_flight == [2, 2, 2]
        pool.release(held[0])  # channel 0 frees up: the next call goes there
        assert pool.acquire() == held[0]
        assert pool.in_flight == [2, 2, 2]
    finally:
        await pool.close()


async def test_each_worker_gets_an_equal_share_however_channels_were_dealt():
    """3 of 4 connections on worker a, 1 on b: calls still split half and half, one
    at a time and with many in flight."""
    pool = placed(ChannelPool(TARGET, 4), "a", "a", "a", "b")
    worker = {0: "a", 1: "a", 2: "a", 3: "b"}
    try:
        one_by_one = Counter()
        for _ in range(100):
            i = pool.acquire()
            one_by_one[worker[i]] += 1
            pool.release(i)
        assert one_by_one == {"a": 50, "b": 50}

        held = [pool.acquire() for _ in range(16)]
        assert Counter(worker[i] for i in held) == {"a": 8, "b": 8}
        # within worker a the calls spread over its channels
        assert sorted(pool.in_flight[:3]) == [2, 3, 3]
    finally:
        await pool.close()


async def test_a_slower_worker_gets_fewer_new_calls():
    pool = placed(ChannelPool(TARGET, 2), "a", "b")
    try:
        held = [pool.acquire() for _ in range(8)]
        assert pool.in_flight == [4, 4]
        for i in held:  # b answered its four, a still works on its own
            if i == 1:
                pool.release(i)
        assert [pool.acquire() for _ in range(4)] == [1, 1, 1, 1]
        assert pool.in_flight == [4, 4]
    finally:
        await pool.close()


async def test_channels_of_unknown_workers_count_alone():
    pool = placed(ChannelPool(TARGET, 3), None, "a", "a")
    try:
        held = [pool.acquire() for _ in range(4)]
        # two groups of load: channel 0 alone, and worker a's two channels
        assert Counter(0 if i == 0 else "a" for i in held) == {0: 2, "a": 2}
    finally:
        await pool.close()


async def test_surplus_channels_are_redialed_only_when_workers_are_missed():
    pool = placed(ChannelPool(TARGET, 4), "a", "a", "a", "a")
    try:
        assert pool._surplus() == []  # the server did not say how many workers it has
        pool.server_workers = 1
        assert pool._surplus() == []  # one worker: all channels on it is right
        pool.server_workers = 2
        assert pool._surplus() == [1, 2, 3]  # two workers, one holds all
        placed(pool, "a", "a", "b", "a")
        assert pool._surplus() == []  # both workers hold channels: enough
        pool.server_workers = 8
        assert pool._surplus() == [1, 3]  # 4 channels could reach 4 of the 8
    finally:
        await pool.close()


async def test_a_channel_that_refused_a_call_is_passed_over_for_a_while():
    """Its worker refuses at once (draining, full), so it has the fewest calls in flight:
    without the pause it would draw every call, retries included."""
    pool = placed(ChannelPool(TARGET, 2), "a", "b")
    try:
        busy = [pool.acquire() for _ in range(6)]  # 3 each, all still in flight
        pool.avoid(0, seconds=0.2)
        assert [pool.acquire() for _ in range(5)] == [1] * 5
        await asyncio.sleep(0.3)
        assert pool.acquire() == 0  # back in turn, and the least busy by far now
        assert len(busy) == 6
        lone = placed(ChannelPool(TARGET, 1), "a")
        try:
            lone.avoid(0, seconds=0.2)
            assert lone.acquire() == 0  # the only channel still takes calls
        finally:
            await lone.close()
    finally:
        await pool.close()


def test_pool_size_is_checked():
    assert DEFAULT_CHANNELS == 4
    assert check_size(1) == 1
    for bad in (0, -1, 1.5, True, "4"):
        with pytest.raises(ValueError, match="channels must be a positive integer"):
            check_size(bad)  # type: ignore[arg-type]
