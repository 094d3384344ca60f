"""The supervisor's bookkeeping: why a worker died, and when it is restarted."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from tensorwire.ops.supervisor import (
    BACKOFF_MAX,
    EXIT_STARTUP,
    MAX_STARTUP_FAILURES,
    STABLE_AFTER,
    Supervisor,
    describe_exit,
    reserve_port,
)
from tensorwire.ops.worker_status import StatusReader, WorkerStatus
from tensorwire.settings import Settings


class DeadProc:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.stdin = None


def test_describe_exit():
    assert describe_exit(-signal.SIGKILL) == "killed by signal SIGKILL (out of memory?)"
    assert describe_exit(-signal.SIGSEGV) == "killed by signal SIGSEGV"
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(EXIT_STARTUP) == "failed to start (exit code 3)"


def test_back_off_doubles_and_resets_after_a_stable_run(caplog):
    sup = Supervisor(Settings(workers=2))
    sup._served = True  # (before it, the first death stops the server)
    slot = sup.slots[0]
    delays = []
    now = 1000.0
    for _ in range(9):  # crash right after each start
        slot.started = now
        sup._reap(slot, DeadProc(42), 1, now + 1)
        delays.append(slot.restart_at - (now + 1))
        now += 100
    assert delays[:4] == [0.25, 0.5, 1.0, 2.0]
    assert delays[-1] == BACKOFF_MAX
    slot.started = now
    sup._reap(slot, DeadProc(42), -9, now + STABLE_AFTER + 1)  # ran a long time first
    assert slot.restart_at - (now + STABLE_AFTER + 1) == 0.25
    assert "worker 0 (pid 42) killed by signal SIGKILL" in caplog.text
    assert not sup._stopping


def test_a_worker_failing_before_the_server_was_ever_ready_stops_it_at_once(caplog):
    sup = Supervisor(Settings(workers=2))
    for slot in sup.slots:  # both workers report the same failure of __init__
        read_end, write_end = os.pipe()
        slot.status = StatusReader(read_end)
        WorkerStatus(write_end).failed("service M failed in M.__init__: boom\nTraceback")
        slot.status.poll()
    sup._reap(sup.slots[0], DeadProc(7), EXIT_STARTUP, 1.5)
    assert sup._stopping and sup._gave_up and sup._force  # no restart, no back-off
    assert sup.slots[0].restart_at is None
    assert caplog.text.count("service M failed in M.__init__: boom") == 1
    assert "worker 0 (pid 7) failed to start (exit code 3) before the server was ready; " \
           "stopping the server" in caplog.text
    for slot in sup.slots:
        slot.status.close()


def test_status_lines_arrive_whole_and_end_at_eof():
    read_end, write_end = os.pipe()
    reader = StatusReader(read_end)
    os.write(write_end, b'{"ready": tr')
    reader.poll()
    assert not reader.ready and reader.fd is not None  # half a line: not yet
    os.write(write_end, b'ue}\n')
    os.close(write_end)
    reader.poll()
    assert reader.ready and reader.report is None and reader.fd is None


def test_repeated_start_up_failures_stop_the_server_that_had_served():
    sup = Supervisor(Settings(workers=1))
    sup._served = True  # a worker was ready once: a failing restart is retried
    slot = sup.slots[0]
    for i in range(MAX_STARTUP_FAILURES):
        assert not sup._stopping
        slot.started = float(i)
        sup._reap(slot, DeadProc(7), EXIT_STARTUP, i + 0.5)
    assert sup._stopping and sup._gave_up


def test_reserved_port_is_shared_but_not_listening():
    sock = reserve_port("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        other = socket.socket()
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", port))  # a worker binds the same port
        other.listen()
        other.close()
        with pytest.raises(ConnectionRefusedError), socket.create_connection(
                ("127.0.0.1", port), timeout=2):
            pass  # the reservation itself accepts nothing
    finally:
        sock.close()
