"""Real servers for e2e tests: in a background thread (fast) or as a CLI subprocess.

Both bind 127.0.0.1 on free ports (port 0) and are torn down by the fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tensorwire
from tensorwire.ops import loops
from tensorwire.ops.serve import Server
from tensorwire.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningServer:
    http_port: int | None
    grpc_port: int | None
    spec: Any = None
    stop_fn: Any = None
    #: The in-thread server's ServiceRuntime (None for CLI subprocesses).
    runtime: Any = None
    #: The in-thread server's event loop (None for CLI subprocesses).
    loop: Any = None
    #: The in-thread server itself (`tensorwire.ops.serve.Server`).
    server: Any = None
    process: subprocess.Popen | None = None
    logs: list[str] = field(default_factory=list)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def stop(self) -> None:
        if self.stop_fn is not None:
            self.stop_fn()
            self.stop_fn = None

    def output(self) -> str:
        """What a `spawn_cli(..., drain_output=True)` process printed so far."""
        return "".join(self.logs)


def start_in_thread(service: type | list[tuple[type, Any]], **settings: Any) -> RunningServer:
    """Run the service's Server on its own event loop in a daemon thread (`service`: a
    class, or several as (class, `Placement`) pairs)."""
    if isinstance(service, list):
        served: Any = [(tensorwire.get_service_spec(c), p) for c, p in service]
        spec = served[0][0]
    else:
        served = spec = tensorwire.get_service_spec(service)
    opts = {"http_port": 0, "grpc_port": 0, "graceful_timeout": 2.0, **settings}
    s = Settings(**{k: v for k, v in opts.items() if k in Settings.__dataclass_fields__})
    s.extra.update({k: v for k, v in opts.items() if k not in Settings.__dataclass_fields__})
    # The loop a CLI server would take: TENSORWIRE_LOOP as the environment says, else
    # `auto` (uvloop where installed), so that one variable moves every e2e server.
    loop = loops.new_loop(opts.get("loop") or os.environ.get("TENSORWIRE_LOOP") or "auto")
    started = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        server = Server(served, s)
        box["server"] = server

        async def main() -> None:
            try:
                box["bound"] = await server.start()
            except BaseException as exc:  # surface bind/start errors to the test
                box["error"] = exc
                started.set()
                return
            started.set()
            await server.wait()
            await server.stop()

        loop.run_until_complete(main())
        loop.close()

    thread = threading.Thread(target=run, name=f"tensorwire-{spec.name}", daemon=True)
    thread.start()
    if not started.wait(60):
        raise TimeoutError("server did not start in 60 s")
    if "error" in box:
        raise box["error"]

    def stop() -> None:
        loop.call_soon_threadsafe(box["server"].request_stop)
        thread.join(30)

    bound = box["bound"]
    return RunningServer(bound.http_port, bound.grpc_port, spec=spec, stop_fn=stop,
                         runtime=box["server"].runtime, loop=loop, server=box["server"])


@contextlib.contextmanager
def serving(service: type | list[tuple[type, Any]], **settings: Any
            ) -> Iterator[RunningServer]:
    server = start_in_thread(service, **settings)
    try:
        yield server
    finally:
        server.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n: int) -> list[int]:
    """`n` distinct free ports: each socket stays bound until all are picked (two
    `free_port()` calls in a row may get the same port back, and then a server's two
    protocols collide on it)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def wait_ready(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} not ready after {timeout} s")


def spawn_cli(target: str, *extra: str, env: dict[str, str] | None = None,
              http: bool = True, cwd: Path = ROOT, drain_output: bool = False,
              wrap: tuple[str, ...] = ()) -> RunningServer:
    """`tensorwire serve TARGET` as a subprocess, waited on until /readyz answers 200.

    `drain_output`: read the process' output continuously into `.logs` / `.output()`
    (a chatty server, e.g. with access logs, would otherwise block on a full pipe).
    `wrap`: a command that execs the server's (e.g. `unshare` with its arguments), so
    the process is still the server's.
    """
    http_port, grpc_port = free_ports(2)
    cmd = [*wrap, sys.executable, "-m", "tensorwire", "serve", target,
           "--http-port", str(http_port), "--grpc-port", str(grpc_port), *extra]
    proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    server = RunningServer(http_port, grpc_port, process=proc)
    reader = None
    if drain_output:
        def drain() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                server.logs.append(line)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()

    def stop() -> None:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        with contextlib.suppress(ProcessLookupError):  # workers left behind, if any
            os.killpg(proc.pid, signal.SIGKILL)
        if reader is not None:
            reader.join(10)

    server.stop_fn = stop
    if http:
        try:
            wait_ready(server.http_url, proc=proc)
        except Exception:
            stop()
            out = server.output() if drain_output else (
                proc.stdout.read() if proc.stdout else "")
            raise RuntimeError(f"{' '.join(cmd)} failed to start:\n{out}") from None
    return server


def url_of(server: RunningServer, protocol: str) -> str:
    """The client URL of a running server for `protocol` ("http" or "grpc")."""
    return server.http_url if protocol == "http" else f"grpc://{server.grpc_target}"
