"""`python -m tensorwire.ops.worker`: one worker process of `tensorwire serve --workers N`.

Started by the supervisor (`tensorwire.ops.supervisor`) or the reloader
(`tensorwire.ops.reload`), which write one JSON line on stdin: `{"settings": {...}}`,
plus `"explicit": [names]` when the worker itself is to layer the service's
`@service(...)` options under the settings so named (the reloader's parent never imports
the service). The worker loads the service once, serves until SIGTERM/SIGINT or
until its stdin closes (the supervisor is gone), drains, and exits 0. It exits with
code 3 when it cannot start (the service does not load, a port does not bind), so the
supervisor can tell a crash loop at start-up from a crash later on. With `"status_fd"`
in that line it tells the supervisor through that pipe that it is ready, or why it
cannot start (`tensorwire.ops.worker_status`), and leaves printing the reason to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import traceback

from ..contract.options import read_service_options
from ..runtime.service import InitFailure
from ..settings import Settings
from ..telemetry import logs
from . import loops
from .hosting import load_specs, placed, service_entries
from .loader import ImportFailure, LoadError, failure_report
from .ports import BindError
from .serve import Server, settle_heap
from .supervisor import EXIT_STARTUP
from .worker_status import WorkerStatus

log = logging.getLogger("tensorwire.worker")


def read_first_line(fd: int = 0) -> tuple[bytes, bytes]:
    """The settings line on stdin, and what came after it in the same reads.

    Read from the raw fd: the supervisor may have written another worker's model-control
    line before this interpreter got here (a slow start under load), and a buffered
    `readline` kept it in its buffer, out of `_watch_stdin`'s reach: this worker never
    followed that change (seen in CI: one of two workers kept serving an unloaded
    service)."""
    data = b""
    with contextlib.suppress(OSError):
        while b"\n" not in data and (chunk := os.read(fd, 65536)):
            data += chunk
    line, _, rest = data.partition(b"\n")
    return line, rest


def _watch_stdin(loop: asyncio.AbstractEventLoop, server: Server, early: bytes = b""
                 ) -> None:
    """Follow the other workers' model control (`{"control": op, "service": name}` lines
    the supervisor writes; `early`: what was read with the settings line); stop
    (gracefully) when the supervisor's end closes."""

    def read_lines() -> None:
        # os.read on the raw fd: a daemon thread blocked in a *buffered* read would
        # hold the buffer's lock and abort the interpreter's shutdown.
        *lines, buffer = early.split(b"\n")
        for line in lines:
            _follow_line(loop, server, line)
        with contextlib.suppress(OSError):
            while chunk := os.read(0, 4096):
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    _follow_line(loop, server, line)
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(server.request_stop)

    threading.Thread(target=read_lines, name="tensorwire-stdin", daemon=True).start()


def _follow_line(loop: asyncio.AbstractEventLoop, server: Server, line: bytes) -> None:
    """One line from the supervisor: a change another worker made, made here too."""
    try:
        message = json.loads(line)
    except ValueError:
        return
    if isinstance(message, dict) and message.get("control") in ("load", "unload"):
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(server.follow, message["control"],
                                      str(message.get("service")))


def _with_service_options(settings: Settings, spec, explicit: set[str]) -> Settings:
    """The service's @service options under the operator's explicit settings (one
    warning per ignored option). Never the worker count: this is the only worker."""
    options = read_service_options(spec.config, spec.cls.__qualname__)
    for path, why in options.ignored:
        log.warning("@service option %s is ignored: %s", path, why)
    values = {k: v for k, v in options.settings.items()
              if k not in explicit and k not in ("workers", "reload")}
    return dataclasses.replace(settings, **values).validate()


def _cannot_start(status: WorkerStatus | None, report: str) -> int:
    """Why this worker cannot start: told to the supervisor, which prints it once for the
    whole server (every worker fails alike), or logged here when none listens (`--reload`)."""
    if status is not None:
        status.failed(report)
    else:
        log.error("%s", report)
    return EXIT_STARTUP


async def _serve(settings: Settings, explicit: set[str] | None = None,
                 status: WorkerStatus | None = None,
                 loaded: dict[str, bool] | None = None, early: bytes = b"") -> int:
    # A stop can come while the service is still loading (the supervisor forwards a
    # SIGTERM to every worker, ready or not): from the first moment it is noted, not the
    # default action that kills the process and reads as a crash.
    loop = asyncio.get_running_loop()
    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.append, sig)
    targets = settings.service or "the [[services]]"
    try:
        entries = service_entries(settings)
        specs = load_specs(entries)
        if explicit is not None:
            settings = _with_service_options(settings, specs[0], explicit)
        services = placed(specs, entries, settings)
    except ImportFailure as exc:
        return _cannot_start(status, failure_report(exc))
    except (LoadError, TypeError, ValueError) as exc:  # ConfigError: a clash, an entry
        return _cannot_start(status, f"worker cannot load {targets}: {exc}")
    try:
        server = Server(services, settings)
    except Exception as exc:  # e.g. tracing asked for without the otel extra
        return _cannot_start(status, f"worker cannot serve {targets}: {exc}")
    server.want(loaded or {})  # as the other workers' model control left it
    if status is not None:  # what this worker loads or unloads, the others do too
        server.relay = status.control
    await asyncio.sleep(0)  # run the handler of a signal that came while loading
    if stopping:
        log.info("worker stopped before it started serving")
        return 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    _watch_stdin(loop, server, early)
    try:
        await server.start()
    except InitFailure as exc:  # the traceback of the user's __init__, under its phase
        return _cannot_start(status, failure_report(exc))
    except BindError as exc:
        return _cannot_start(status, f"worker failed to start: {exc}")
    except Exception:
        return _cannot_start(status, "worker failed to start\n"
                             + traceback.format_exc().rstrip("\n"))
    if status is not None:  # listening now: a death from here on is not a failed start
        status.ready()
    settle_heap()
    log.info("worker %s ready (pid %d, loop %s)", os.environ.get("TENSORWIRE_WORKER_ID", "?"),
             os.getpid(), loops.running())
    await server.wait()
    await server.stop()
    return 0


def main() -> int:
    line, early = read_first_line()
    try:
        config = json.loads(line)
        settings = Settings(**config["settings"])
        explicit = set(config["explicit"]) if "explicit" in config else None
        status_fd = config.get("status_fd")
        loaded = dict(config.get("loaded") or {})
    except (ValueError, KeyError, TypeError) as exc:
        print(f"tensorwire.worker: expected a settings line on stdin: {exc}",
              file=sys.stderr)
        return EXIT_STARTUP
    logs.configure(settings.log_level, settings.log_format)
    status = None
    if isinstance(status_fd, int):
        os.set_inheritable(status_fd, False)  # the service's own subprocesses: not theirs
        status = WorkerStatus(status_fd)
    try:
        return loops.run(_serve(settings, explicit, status, loaded, early), settings.loop)
    finally:
        # The loop's handlers are gone: a stop signal now (one the supervisor sent while
        # this worker was already on its way out) must not kill it as a crash would.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
