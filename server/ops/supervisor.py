"""`tensorwire serve --workers N`: a supervisor process and N worker processes.

Each worker is a fresh interpreter (`tensorwire.ops.worker` run by WORKER_BOOT, never a fork: gRPC's
C core does not survive fork after it started) that loads the service once and serves
both protocols on the same ports as its siblings, via SO_REUSEPORT; the kernel spreads
new connections across them. The supervisor reserves the ports first (a bound,
non-listening SO_REUSEPORT socket, so port 0 resolves once for all workers; before it, a
probe without SO_REUSEPORT, so that a port held by any other server, one with workers of
its own included, fails fast: `tensorwire.ops.ports`), hands each worker its settings
as one JSON line on stdin (not argv or env: the auth token stays out of `ps`), and then
watches:

- a worker that dies is logged with its exit code or signal and restarted after a
  back-off (0.25 s doubling to 30 s; reset once a worker has run for a minute);
- a worker that fails before the server was ever ready (the model does not load: the
  same `__init__` fails in every worker) stops the whole server at once with exit code 1,
  its report printed once (the workers tell it through `tensorwire.ops.worker_status`); once the
  server has served, a worker that fails to *start* (exit code 3) five times in a row
  stops it the same way, instead of looping;
- SIGTERM/SIGINT are forwarded to every worker, which drains (see `tensorwire.serve`);
  the supervisor waits `graceful_timeout` (+ a margin), kills stragglers, and exits 0
  when every worker stopped cleanly. A second signal kills the workers at once.

If the supervisor itself dies, the workers see their stdin close and drain and exit.

Metrics: the supervisor gives workers a fresh `PROMETHEUS_MULTIPROC_DIR` (unless one is
set already), marks dead workers' gauges dead, and removes the directory at exit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from prometheus_client import multiprocess

from ..settings import Settings
from ..telemetry.metrics import MULTIPROC_ENV
from . import ports
from .hosting import describe
from .worker_status import StatusReader

log = logging.getLogger("tensorwire.workers")

EXIT_STARTUP = 3  # a worker could not start (see tensorwire.ops.worker)
MAX_STARTUP_FAILURES = 5
BACKOFF_FIRST = 0.25
BACKOFF_MAX = 30.0
STABLE_AFTER = 60.0  # seconds alive after which a death is not counted as a crash loop
STOP_MARGIN = 5.0
POLL = 0.2


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        hint = " (out of memory?)" if -returncode == signal.SIGKILL else ""
        return f"killed by signal {name}{hint}"
    if returncode == EXIT_STARTUP:
        return f"failed to start (exit code {returncode})"
    return f"exited with code {returncode}"


def reserve_port(host: str, port: int, protocol: str = "HTTP") -> socket.socket:
    """Hold a port the workers will share (`tensorwire.ops.ports.reserve`): refused with
    a `BindError` naming the port when anything else, another `--workers N` server
    included, holds it already."""
    return ports.reserve(protocol, host, port)


#: A worker process ignores stop signals from its first instruction until its event loop
#: takes them over (`tensorwire.ops.worker`): a SIGTERM forwarded while it still imports
#: would otherwise kill it like a crash. A stop it ignored is not lost: the supervisor
#: also closes the worker's stdin, which the worker takes as a stop too.
WORKER_BOOT = ("import signal, runpy\n"
               "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
               "runpy.run_module('tensorwire.ops.worker', run_name='__main__', alter_sys=True)\n")


def start_worker(settings: Settings, env: dict[str, str],
                 explicit: set[str] | None = None,
                 status_fd: int | None = None,
                 loaded: dict[str, bool] | None = None) -> subprocess.Popen:
    """`python -m tensorwire.ops.worker`, handed its settings as one JSON line on stdin.

    `explicit`: the names of the settings the operator gave; when given, the worker
    layers the service's `@service(...)` options under them itself, after it imported
    the service (`--reload`, whose parent never imports it).
    `status_fd`: the write end of a pipe the worker reports "ready" or its start-up
    failure on (`tensorwire.ops.worker_status`); without it the worker logs the failure itself.
    `loaded`: service name -> whether to load it, as model control left the others.
    """
    proc = subprocess.Popen([sys.executable, "-c", WORKER_BOOT],
                            stdin=subprocess.PIPE, env=env,
                            pass_fds=() if status_fd is None else (status_fd,))
    config: dict[str, object] = {"settings": dataclasses.asdict(settings)}
    if explicit is not None:
        config["explicit"] = sorted(explicit)
    if status_fd is not None:
        config["status_fd"] = status_fd
    if loaded:
        config["loaded"] = loaded
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(config, default=str).encode() + b"\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass  # it died at once; the caller sees its exit code
    return proc


@dataclasses.dataclass
class Slot:
    """One worker position; its process is replaced when it dies."""

    index: int
    proc: subprocess.Popen | None = None
    started: float = 0.0
    failures: int = 0
    startup_failures: int = 0
    restart_at: float | None = None
    status: StatusReader | None = None


class Supervisor:
    def __init__(self, settings: Settings) -> None:
        self.settings = dataclasses.replace(settings)
        self.slots = [Slot(i) for i in range(settings.workers)]
        self._wake = threading.Event()
        self._stopping = False
        self._force = False
        self._gave_up = False
        self._served = False  # a worker was ready once: start-up failures are retried
        self._sockets: list[socket.socket] = []
        self._metrics_dir: str | None = None
        self._own_metrics_dir = False
        #: Service name -> loaded, as model control left it (new workers start so).
        self._loaded: dict[str, bool] = {}

    # ------------------------------------------------------------------ run
    def run(self) -> int:
        s = self.settings
        try:
            if s.http:
                self._sockets.append(reserve_port(s.host, s.http_port, "HTTP"))
                s.http_port = self._sockets[-1].getsockname()[1]
            if s.grpc:
                self._sockets.append(reserve_port(s.host, s.grpc_port, "gRPC"))
                s.grpc_port = self._sockets[-1].getsockname()[1]
        except OSError as exc:
            self._close_sockets()
            print(f"tensorwire: error: {exc}", file=sys.stderr)
            return 1
        self._prepare_metrics_dir()
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for slot in self.slots:
                self._spawn(slot)
            where = [f"HTTP port {s.http_port}" if s.http else "",
                     f"gRPC port {s.grpc_port}" if s.grpc else ""]
            log.info("tensorwire supervising %d workers of %s on %s: %s", len(self.slots),
                        describe(s), s.host, ", ".join(w for w in where if w))
            while not self._stopping:
                self._wake.wait(POLL)
                self._wake.clear()
                if not self._stopping:
                    self._check()
            return self._shutdown()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._close_sockets()
            for slot in self.slots:
                if slot.status is not None:
                    slot.status.close()
            if self._own_metrics_dir and self._metrics_dir:
                shutil.rmtree(self._metrics_dir, ignore_errors=True)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self._stopping:
            self._force = True
        self._stopping = True
        self._wake.set()

    # ---------------------------------------------------------------- workers
    def _prepare_metrics_dir(self) -> None:
        if not self.settings.metrics:
            return
        existing = os.environ.get(MULTIPROC_ENV)
        if existing:
            self._metrics_dir = existing
            return
        self._metrics_dir = tempfile.mkdtemp(prefix="tensorwire-metrics-")
        self._own_metrics_dir = True
        log.info("workers' metrics in %s (removed at exit)", self._metrics_dir)

    def _spawn(self, slot: Slot) -> None:
        env = {**os.environ, "TENSORWIRE_WORKER_ID": str(slot.index)}
        if self._metrics_dir:
            env[MULTIPROC_ENV] = self._metrics_dir
        read_end, write_end = os.pipe()
        try:
            proc = start_worker(self.settings, env, status_fd=write_end,
                                loaded=self._loaded)
        finally:
            os.close(write_end)  # the worker holds it now; its exit is our EOF
        if slot.status is not None:
            slot.status.close()
        slot.status = StatusReader(read_end)
        slot.proc = proc
        slot.started = time.monotonic()
        slot.restart_at = None
        log.info("worker %d started (pid %d)", slot.index, proc.pid)

    def _check(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if self._stopping:  # e.g. gave up: what the others say is not news
                return
            proc = slot.proc
            if slot.status is not None:
                slot.status.poll()
                self._served = self._served or slot.status.ready
                self._relay(slot)
            if proc is not None and (rc := proc.poll()) is not None:
                if slot.status is not None:
                    slot.status.poll()  # all it said before it exited
                self._reap(slot, proc, rc, now)
            if slot.proc is None and slot.restart_at is not None and now >= slot.restart_at:
                self._spawn(slot)

    def _relay(self, slot: Slot) -> None:
        """Tell every other worker of the services `slot`'s worker loaded or unloaded
        (model control), and remember it for the workers started later."""
        assert slot.status is not None
        controls, slot.status.controls = slot.status.controls, []
        for op, service in controls:
            self._loaded[service] = op == "load"
            line = json.dumps({"control": op, "service": service}).encode() + b"\n"
            for other in self.slots:
                if other is slot or other.proc is None or other.proc.stdin is None:
                    continue
                try:
                    other.proc.stdin.write(line)
                    other.proc.stdin.flush()
                except OSError:  # it is dying: its successor starts with `_loaded`
                    pass
            log.info("worker %d %sed service %s; the other workers follow", slot.index,
                     op, service)

    def _reap(self, slot: Slot, proc: subprocess.Popen, rc: int, now: float) -> None:
        slot.proc = None
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()
        self._mark_dead(proc.pid)
        lived = now - slot.started
        slot.failures = 1 if lived >= STABLE_AFTER else slot.failures + 1
        slot.startup_failures = slot.startup_failures + 1 if rc == EXIT_STARTUP else 0
        why = describe_exit(rc)
        report = slot.status.report if slot.status is not None else None
        if not self._served:
            # Never ready: what failed this worker (a model that does not load, a port,
            # a missing GPU) fails its siblings and every restart alike. Said once,
            # and the server stops now rather than after minutes of retries.
            if report:
                log.error("%s", report)
            log.error("worker %d (pid %d) %s before the server was ready; stopping the "
                      "server", slot.index, proc.pid, why)
            self._gave_up = True
            self._stopping = True
            self._force = True  # its siblings never served: nothing to drain
            return
        if report:
            log.error("%s", report)
        if slot.startup_failures >= MAX_STARTUP_FAILURES:
            log.error("worker %d (pid %d) %s %d times in a row; stopping the server",
                      slot.index, proc.pid, why, slot.startup_failures)
            self._gave_up = True
            self._stopping = True
            return
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (slot.failures - 1))
        log.error("worker %d (pid %d) %s after %.1f s; restarting in %.2f s", slot.index,
                  proc.pid, why, lived, delay)
        slot.restart_at = now + delay

    def _mark_dead(self, pid: int) -> None:
        if not self._metrics_dir:
            return
        with contextlib.suppress(OSError):
            multiprocess.mark_process_dead(pid, self._metrics_dir)

    # --------------------------------------------------------------- shutdown
    def _shutdown(self) -> int:
        live = [slot.proc for slot in self.slots if slot.proc is not None]
        if not self._gave_up:
            log.info("tensorwire: stopping %d workers (grace %.0fs)", len(live),
                        self.settings.graceful_timeout)
        for proc in live:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL if self._force else signal.SIGTERM)
            if proc.stdin is not None:  # the stop a still-starting worker cannot miss
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        deadline = time.monotonic() + self.settings.graceful_timeout + STOP_MARGIN
        clean = not self._gave_up
        killed = self._force
        for proc in live:
            while proc.poll() is None:
                if self._force and not killed:
                    killed = True
                    for other in live:
                        with contextlib.suppress(ProcessLookupError):
                            other.kill()
                if time.monotonic() >= deadline:
                    log.error("worker pid %d did not stop in time; killing it", proc.pid)
                    proc.kill()
                    proc.wait()
                    break
                self._wake.wait(POLL)
                self._wake.clear()
            if proc.returncode != 0:
                clean = False
                if not (killed and proc.returncode == -signal.SIGKILL):  # ours: no news
                    log.error("worker pid %d %s while stopping", proc.pid,
                              describe_exit(proc.returncode))
            self._mark_dead(proc.pid)
            with contextlib.suppress(OSError):
                if proc.stdin:
                    proc.stdin.close()
        return 0 if clean else 1

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
