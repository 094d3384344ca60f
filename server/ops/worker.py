"""`python -m tensorwire.ops.worker`: one worker process of `tensorwire serve --workers N`.

Started by the supervisor (`tensorwire.ops.supervisor`), which writes one JSON line on stdin:
`{"settings": {...}}`. The worker loads the service once, serves until SIGTERM/SIGINT or
until its stdin closes (the supervisor is gone), drains, and exits 0. It exits with
code 3 when it cannot start (the service does not load, a port does not bind), so the
supervisor can tell a crash loop at start-up from a crash later on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading

from ..settings import Settings
from ..telemetry import logs
from .loader import LoadError, load_service
from .serve import Server, settle_heap
from .supervisor import EXIT_STARTUP

log = logging.getLogger("tensorwire.worker")


def _watch_stdin(loop: asyncio.AbstractEventLoop, server: Server) -> None:
    """Stop (gracefully) when the supervisor's end of stdin closes."""

    def wait_eof() -> None:
        # os.read on the raw fd: a daemon thread blocked in a *buffered* read would
        # hold the buffer's lock and abort the interpreter's shutdown.
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        with contextlib.suppress(RuntimeError):  # loop already closed
            loop.call_soon_threadsafe(server.request_stop)

    threading.Thread(target=wait_eof, name="tensorwire-stdin", daemon=True).start()


async def _serve(settings: Settings) -> int:
    try:
        spec = load_service(settings.service)
    except (LoadError, TypeError) as exc:
        log.error("worker cannot load %s: %s", settings.service, exc)
        return EXIT_STARTUP
    server = Server(spec, settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, server.request_stop)
    _watch_stdin(loop, server)
    try:
        await server.start()
    except Exception:
        log.exception("worker failed to start")
        return EXIT_STARTUP
    settle_heap()
    log.info("worker %s ready (pid %d)", os.environ.get("TENSORWIRE_WORKER_ID", "?"),
             os.getpid())
    await server.wait()
    await server.stop()
    return 0


def main() -> int:
    line = sys.stdin.buffer.readline()
    try:
        settings = Settings(**json.loads(line)["settings"])
    except (ValueError, KeyError, TypeError) as exc:
        print(f"tensorwire.worker: expected a settings line on stdin: {exc}",
              file=sys.stderr)
        return EXIT_STARTUP
    logs.configure(settings.log_level, settings.log_format)
    return asyncio.run(_serve(settings))


if __name__ == "__main__":
    sys.exit(main())
