"""`tensorwire serve --reload`: the development loop.

The parent process never imports the service. It starts one worker process
(`tensorwire.ops.worker`, as `--workers N` does), watches the service's source folder
with watchfiles (the library uvicorn's `--reload` uses; the `reload` extra) and, when a
`.py` file there changes, stops the worker and starts a fresh one on the same ports. A
fresh interpreter re-imports everything, so nothing stale survives, and a mistake in the
module or in `__init__` shows its traceback and waits for the next save instead of
ending the loop.

Development only: one worker (refused with `--workers` > 1), and in-flight requests get
at most `RESTART_GRACE` seconds when a change stops their worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..settings import Settings
from .hosting import describe
from .supervisor import EXIT_STARTUP, describe_exit, start_worker

log = logging.getLogger("tensorwire.reload")

#: Seconds a worker being replaced gets to finish its requests.
RESTART_GRACE = 3.0
EXIT_USAGE = 2
#: Seconds between two looks at whether a new worker listens yet.
ANNOUNCE_POLL = 0.1


def where(settings: Settings) -> str:
    """The addresses of a server, as its start-up line names them."""
    scheme = "https" if settings.tls else "http"
    parts = []
    if settings.http:
        base = f"{scheme}://{settings.host}:{settings.http_port}"
        parts.append(f"HTTP on {base} (docs: {base}/docs)")
    if settings.grpc:
        parts.append(f"gRPC on {settings.host}:{settings.grpc_port}"
                     + (" (TLS)" if settings.tls else ""))
    return "; ".join(parts)


def _listening(host: str, port: int) -> bool:
    """Whether something accepts connections on (`host`, `port`); a wildcard bind
    address is reached on the loopback."""
    target = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    try:
        with socket.create_connection((target, port), timeout=1):
            return True
    except OSError:
        return False


def _free_port(host: str) -> int:
    """A port that is free now: port 0 resolves once, so that every restarted worker
    listens where the first one did."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class Reloader:
    """One worker, replaced whenever the watched folder's Python files change."""

    def __init__(self, settings: Settings, explicit: set[str], folder: Path) -> None:
        self.settings = dataclasses.replace(
            settings, workers=1, reload=False,
            graceful_timeout=min(settings.graceful_timeout, RESTART_GRACE))
        self.explicit = explicit
        self.folder = folder
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._generation = 0

    def run(self) -> int:
        try:
            import watchfiles  # the optional `reload` extra, needed by this mode only
        except ImportError:
            print("tensorwire: error: --reload needs the watchfiles package: pip install "
                  "'tensorwire[reload]'", file=sys.stderr)
            return EXIT_USAGE
        s = self.settings
        if s.http and s.http_port == 0:
            s.http_port = _free_port(s.host)
        if s.grpc and s.grpc_port == 0:
            s.grpc_port = _free_port(s.host)
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            self._start()
            log.info("tensorwire reload: watching %s for changes to .py files", self.folder)
            for changes in watchfiles.watch(self.folder, watch_filter=watchfiles.PythonFilter(),
                                            stop_event=self._stop, raise_interrupt=False):
                if self._stop.is_set():
                    break
                names = sorted({os.path.relpath(path, self.folder) for _, path in changes})
                log.info("tensorwire reload: %s changed; restarting", ", ".join(names))
                self._stop_worker()
                self._start()
        finally:
            self._stop_worker()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._stop.set()

    def _start(self) -> None:
        self._generation += 1  # the worker's id in its own log lines: 1, 2, ... per restart
        env = {**os.environ, "TENSORWIRE_WORKER_ID": str(self._generation)}
        proc = start_worker(self.settings, env, self.explicit)
        with self._lock:
            self._proc = proc
        threading.Thread(target=self._report_exit, args=(proc,), daemon=True,
                         name="tensorwire-reload-worker").start()
        threading.Thread(target=self._announce, args=(proc,), daemon=True,
                         name="tensorwire-reload-ready").start()

    def _announce(self, proc: subprocess.Popen) -> None:
        """Log where the server is once the new worker listens: the worker cannot (its
        parent knows the ports it was handed, not it, which ports were `0`)."""
        s = self.settings
        port = s.http_port if s.http else s.grpc_port
        while not self._stop.is_set() and proc.poll() is None:
            with self._lock:
                if self._proc is not proc:
                    return  # replaced before it was ready
            if _listening(s.host, port):
                log.info("tensorwire reload: serving %s: %s", describe(s), where(s))
                return
            time.sleep(ANNOUNCE_POLL)

    def _report_exit(self, proc: subprocess.Popen) -> None:
        """A worker that ends on its own (a mistake in the service) is reported; the
        loop goes on and the next save starts a new one."""
        rc = proc.wait()
        with self._lock:
            replaced = self._proc is not proc
        # 0: it drained after a signal (Ctrl-C reaches the whole process group first)
        if replaced or self._stop.is_set() or rc == 0:
            return
        hint = " (see the error above)" if rc == EXIT_STARTUP else ""
        log.error("tensorwire reload: the worker %s%s; save a change to %s to restart it",
                  describe_exit(rc), hint, self.folder)

    def _stop_worker(self) -> None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(OSError):  # a worker still importing takes EOF as stop
                if proc.stdin:
                    proc.stdin.close()
            try:
                proc.wait(self.settings.graceful_timeout + 5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(OSError):
            if proc.stdin:
                proc.stdin.close()
