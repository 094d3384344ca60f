"""float32 tensor echo: tensorwire's tensor wires against bare servers and the raw socket.

    .venv/bin/python bench/tensor_roundtrip.py [--sizes 1,16,64] [--rounds 10] [--loop auto]

Servers, each in its own process: tensorwire (both protocols, an echo API whose root
input and output are `Annotated[np.ndarray, DType("float32")]`, served natively and as
the Open Inference Protocol model `echo`, with system shared memory on), a bare
grpc.aio server echoing the request
bytes, a bare aiohttp server echoing an application/octet-stream body, and a **raw
socket echo**: a Python thread that reads an 8-byte length and then the payload with
`recv_into` into one reused buffer, and answers with `sendall` of it. The raw echo is
the physical limit of the box for a Python process: one copy in, one copy out, nothing
parsed. The load runs here, one request at a time, every form in turn in each round
(raw, gRPC, bare gRPC, `.npy`, v2 binary, bare HTTP, v2 gRPC, v2 through shared memory
over HTTP and over gRPC) so that drift hits all alike.
A round trip counts the client's work too, so every HTTP wire uses the raw echo's client
technique (`LeanHttp`: the request head and the array's memory out with `sendall`, the
answer `recv_into` one buffer; an aiohttp client would itself gather and join a 64 MiB
answer, and measure itself); the gRPC clients are grpc.aio's (the bare one `tobytes`
and `frombuffer`, tensorwire's builds and reads its Tensor message; v2 gRPC sends
`raw_input_contents` and reads `raw_output_contents` as views, as tensorwire's server
does); JSON goes through aiohttp. The **shared-memory rows** (Triton's system
shared-memory extension, `shm_http` and `shm_grpc`) are what a co-located client does:
its tensor is in a registered /dev/shm region (placed there once per size, as
perf_analyzer's `--shared-memory system` does; `--shm-copy` copies it in on every call,
timed, as a client that calls tritonclient's `set_shared_memory_region` each time), it
sends a request naming the input and output regions (no tensor bytes on the socket),
and reads the echo where the server wrote it (a view of the output region).

Per wire and size it prints:
- MB/s = payload bytes (one way, 10^6 bytes per MB) / median round-trip time;
- server CPU ms per MB: the server process's CPU time (every thread's, from
  /proc/PID/task/*/schedstat, nanoseconds) over the timed calls / payload MB;
- payload buffers at the peak: after the timed rounds, one call per wire with
  `tracemalloc` started in the server (through its stdin) and stopped after it: the
  peak of memory allocated during the call, plus each pooled buffer the call was lent
  (allocated before tracing began, so invisible to it), in payload sizes. tracemalloc
  sees every Python and NumPy allocation (bytes, bytearrays, arrays; asyncio's
  transport buffer); it does not see grpc core's C buffers, so the gRPC rows count
  only what crossed into Python.

A call that fails (an error status or exception) or does not echo the tensor is a
failed call: it is counted, printed beside the MB/s and left out of the medians, and a
target is met only when no call failed. Targets (issue 37): HTTP `.npy` and v2 binary
echo at 16 and 64 MiB >= 0.5x the raw echo's MB/s, server CPU per MB <= 2x the raw
echo's, at most one payload-sized buffer per direction alive per request (<= 2 at the
peak); 64 MiB through shared memory >= 5x the same tensor over the socket path (v2
binary over HTTP, v2 raw contents over gRPC). Writes bench/results/tensor_roundtrip.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
import typing as t
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorwire
from bench.support.common import Failures, machine_info, target_met, verdict
from tensorwire.validators import DType

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "tensor_roundtrip.json"
MiB = 1024 * 1024
LIMIT = 1024 * MiB
GRPC_OPTIONS = [("grpc.max_receive_message_length", LIMIT),
                ("grpc.max_send_message_length", LIMIT)]
BARE_METHOD = "/bench.Echo/Echo"


IHCL = "Inference-Header-Content-Length"
#: The raw echo's frame: an 8-byte little-endian payload length, then the payload.
FRAME = struct.Struct("<Q")
#: A directory whose `tensorwire` package the tensorwire server imports instead of this
#: checkout's (a "before" tree: `git archive` of an older commit, its folders mapped as
#: pyproject.toml maps them), so a change is measured against its parent in one run.
OTHER_CHECKOUT = "BENCH_TENSORWIRE_PATH"
#: Every wire in the order a round calls them; the baselines of each comparison.
WIRES = ("raw", "tensorwire_grpc", "bare_grpc", "tensorwire_npy", "tensorwire_v2",
         "bare_http", "tensorwire_v2_grpc", "shm_http", "shm_grpc")
#: Each shared-memory wire, and the socket path of the same protocol it is held to.
SHM_PAIRS = {"shm_http": "tensorwire_v2", "shm_grpc": "tensorwire_v2_grpc"}


# ---------------------------------------------------------------------- servers


@tensorwire.service(name="TensorEcho")
class TensorEcho:
    @tensorwire.api
    def echo(self, x: t.Annotated[np.ndarray, DType("float32")], /
             ) -> t.Annotated[np.ndarray, DType("float32")]:
        return x


def side_channel() -> None:
    """Commands on stdin, answers on stdout, from a thread of the server process:
    `trace` starts tracemalloc (and notes the buffer pool's counters), `peak` answers
    `PEAK <bytes traced at the peak> <pooled buffers reused>` and stops it."""
    import tracemalloc

    def pooled() -> int:
        try:  # a checkout from before the pool (BENCH_TENSORWIRE_PATH) lends none
            from tensorwire.wire import buffers
        except ImportError:
            return 0
        return buffers.POOL.reused

    def loop() -> None:
        reused = 0
        for line in sys.stdin:
            command = line.strip()
            if command == "trace":
                reused = pooled()
                tracemalloc.start()
            elif command == "peak":
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                print(f"PEAK {peak} {pooled() - reused}", flush=True)

    threading.Thread(target=loop, daemon=True, name="bench-side-channel").start()


async def serve_tensorwire() -> None:
    from tensorwire.ops.serve import Server
    from tensorwire.settings import Settings

    shm = {"shared_memory": "system"} if hasattr(Settings, "shared_memory") else {}
    settings = Settings(http_port=0, grpc_port=0, max_request_size=LIMIT,
                        max_response_size=LIMIT, graceful_timeout=1, **shm)
    server = Server(tensorwire.get_service_spec(TensorEcho), settings)
    bound = await server.start()
    print(f"READY {bound.http_port} {bound.grpc_port}", flush=True)
    side_channel()
    await server.wait()


async def serve_bare_grpc() -> None:
    import grpc

    async def echo(request: bytes, context: t.Any) -> bytes:
        return request

    server = grpc.aio.server(options=GRPC_OPTIONS)
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(echo)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(f"READY 0 {port}", flush=True)
    side_channel()
    await server.wait_for_termination()


async def serve_bare_http() -> None:
    from aiohttp import web

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="application/octet-stream")

    app = web.Application(client_max_size=LIMIT)
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"READY {port} 0", flush=True)
    side_channel()
    await asyncio.Event().wait()


def recv_exactly(sock: socket.socket, view: memoryview) -> bool:
    """Fill `view` from `sock`; False when the peer closed first."""
    pos = 0
    while pos < view.nbytes:
        n = sock.recv_into(view[pos:])
        if not n:
            return False
        pos += n
    return True


async def serve_raw() -> None:
    """The raw socket echo: a thread per connection, one reused buffer each."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"READY {listener.getsockname()[1]} 0", flush=True)
    side_channel()

    def serve(conn: socket.socket) -> None:
        buf = bytearray(0)
        head = bytearray(FRAME.size)
        with conn:
            while recv_exactly(conn, memoryview(head)):
                (size,) = FRAME.unpack(head)
                if len(buf) < size:
                    buf = bytearray(size)
                view = memoryview(buf)[:size]
                if not recv_exactly(conn, view):
                    return
                conn.sendall(head)
                conn.sendall(view)

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    await asyncio.to_thread(accept)


SERVERS = {"tensorwire": serve_tensorwire, "grpc": serve_bare_grpc, "http": serve_bare_http,
           "raw": serve_raw}


class Served:
    """One server process: its ports, its CPU time, and its side channel."""

    def __init__(self, kind: str, loop: str = "asyncio") -> None:
        path = str(ROOT)
        if kind == "tensorwire" and os.environ.get(OTHER_CHECKOUT):
            path = f"{os.environ[OTHER_CHECKOUT]}{os.pathsep}{path}"
        env = {**os.environ, "PYTHONPATH": path, "TF_CPP_MIN_LOG_LEVEL": "3"}
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", kind,
                                      "--loop", loop], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            self.proc.kill()
            raise RuntimeError(f"{kind} server failed to start: {line!r}")
        _, http_port, grpc_port = line.split()
        self.http_port, self.grpc_port = int(http_port), int(grpc_port)

    def cpu_ns(self) -> int:
        """CPU nanoseconds every thread of the server has run (threads that ended are
        not in it: the servers here keep theirs)."""
        total = 0
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return total

    def command(self, line: str) -> str | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip() if line == "peak" else None

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# ---------------------------------------------------------------------- clients


class Clients:
    """One echo call per wire, each returning the array it got back."""

    def __init__(self, tw: Served, bare_grpc: Served, bare_http: Served, raw: Served,
                 shm_copy: bool = False) -> None:
        import aiohttp
        import grpc

        from tensorwire.protobuf.descriptors import service_proto

        self.messages = service_proto(tensorwire.get_service_spec(TensorEcho)).messages[
            "echo"]
        self.tw_http = f"http://127.0.0.1:{tw.http_port}/echo"
        self.tw_v2 = f"http://127.0.0.1:{tw.http_port}/v2/models/echo/infer"
        self.bare_http_url = f"http://127.0.0.1:{bare_http.http_port}/echo"
        self.tw_channel = grpc.aio.insecure_channel(f"127.0.0.1:{tw.grpc_port}",
                                                    options=GRPC_OPTIONS)
        self.bare_channel = grpc.aio.insecure_channel(f"127.0.0.1:{bare_grpc.grpc_port}",
                                                      options=GRPC_OPTIONS)
        self.tw_echo = self.tw_channel.unary_unary("/tensor_echo.TensorEcho/Echo")
        self.bare_echo = self.bare_channel.unary_unary(BARE_METHOD)
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1), read_bufsize=4 * MiB)
        self.tw_lean = LeanHttp(tw.http_port)
        self.bare_lean = LeanHttp(bare_http.http_port)
        self.raw_sock = socket.create_connection(("127.0.0.1", raw.http_port))
        self.raw_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.v2_infer = self.tw_channel.unary_unary(
            "/inference.GRPCInferenceService/ModelInfer")
        self.regions = SharedRegions(self.tw_lean, shm_copy)
        self.servers = {"raw": raw, "tensorwire_grpc": tw, "bare_grpc": bare_grpc,
                        "tensorwire_npy": tw, "tensorwire_v2": tw, "bare_http": bare_http,
                        "tensorwire_json": tw, "tensorwire_v2_grpc": tw, "shm_http": tw,
                        "shm_grpc": tw}

    async def close(self) -> None:
        self.regions.close()
        self.raw_sock.close()
        self.tw_lean.close()
        self.bare_lean.close()
        await self.session.close()
        await self.tw_channel.close()
        await self.bare_channel.close()

    def call(self, wire: str) -> t.Callable[[np.ndarray], t.Awaitable[np.ndarray]]:
        return {"raw": self.raw_echo, "bare_http": self.bare_http_echo}.get(
            wire) or getattr(self, wire)

    async def raw_echo(self, x: np.ndarray) -> np.ndarray:
        """The physical limit: the array's memory out, one preallocated array in (the
        blocking socket calls, as the raw server makes them)."""
        sock = self.raw_sock
        out = np.empty_like(x)
        head = bytearray(FRAME.size)
        sock.sendall(FRAME.pack(x.nbytes))
        sock.sendall(memoryview(x).cast("B"))
        if not (recv_exactly(sock, memoryview(head))
                and recv_exactly(sock, memoryview(out).cast("B"))):
            raise ConnectionError("the raw echo closed the connection")
        return out

    async def tensorwire_grpc(self, x: np.ndarray) -> np.ndarray:
        m = self.messages  # the client side of the same contract: tensorwire.protobuf
        return m.parse_response(await self.tw_echo(m.request_bytes({"x": x})))

    async def bare_grpc(self, x: np.ndarray) -> np.ndarray:
        return np.frombuffer(await self.bare_echo(x.tobytes()), np.float32)

    async def tensorwire_npy(self, x: np.ndarray) -> np.ndarray:
        from numpy.lib import format as npformat

        from tensorwire.wire import npy

        header = io.BytesIO()
        npformat.write_array_header_1_0(header, npformat.header_data_from_array_1_0(x))
        _, body = self.tw_lean.post("/echo", {"Content-Type": npy.NPY, "Accept": npy.NPY},
                                    header.getvalue(), memoryview(x).cast("B"))
        return npy.read(body)

    async def tensorwire_v2(self, x: np.ndarray) -> np.ndarray:
        """Triton's binary extension both ways, as tritonclient sends and reads it."""
        import orjson

        head = orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                         "shape": list(x.shape),
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "parameters": {"binary_data_output": True}})
        headers, body = self.tw_lean.post("/v2/models/echo/infer",
                                          {IHCL: str(len(head))}, head,
                                          memoryview(x).cast("B"))
        length = int(headers[IHCL.lower()])
        out = orjson.loads(body[:length])["outputs"][0]
        return np.frombuffer(body, np.float32, offset=length).reshape(out["shape"])

    async def tensorwire_v2_grpc(self, x: np.ndarray) -> np.ndarray:
        """v2 `ModelInfer`: the tensor in `raw_input_contents` (joined once into the
        message, as grpc needs bytes), the echo read from `raw_output_contents` as a view
        of the answer (tensorwire's own framing helpers, which its server uses)."""
        from tensorwire import inference as pb
        from tensorwire.v2.raw_contents import (
            RAW_INPUT_CONTENTS,
            RAW_OUTPUT_CONTENTS,
            join_raw_outputs,
            split_raw_inputs,
        )

        request = pb.ModelInferRequest(model_name="echo")
        request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        data = join_raw_outputs(request.SerializeToString(), [memoryview(x).cast("B")],
                                field=RAW_INPUT_CONTENTS)
        head, raws = split_raw_inputs(await self.v2_infer(data), field=RAW_OUTPUT_CONTENTS)
        if raws is None:  # a small answer: the raw bytes are in the parsed message
            raws = list(pb.ModelInferResponse.FromString(head).raw_output_contents)
        return np.frombuffer(raws[0], np.float32)

    def _shm_in(self, x: np.ndarray) -> tuple[dict[str, t.Any], dict[str, t.Any]]:
        """(input, output) parameters of the tensor in the input region (copied there
        now with `--shm-copy`, else placed once per size)."""
        regions = self.regions
        if regions.refused is not None:
            raise RuntimeError(f"no shared memory: {regions.refused}")
        if regions.copy_each_call:
            regions.place(x)
        return ({"shared_memory_region": regions.names[0],
                 "shared_memory_byte_size": x.nbytes},
                {"shared_memory_region": regions.names[1],
                 "shared_memory_byte_size": x.nbytes})

    async def shm_http(self, x: np.ndarray) -> np.ndarray:
        """v2 over HTTP with both tensors in shared memory: a small JSON body each way."""
        import orjson

        given, wanted = self._shm_in(x)
        head = orjson.dumps({"inputs": [{"name": "x", "datatype": "FP32",
                                         "shape": list(x.shape), "parameters": given}],
                             "outputs": [{"name": "result", "parameters": wanted}]})
        _, body = self.tw_lean.post("/v2/models/echo/infer", {}, head)
        out = orjson.loads(body)["outputs"][0]
        return np.frombuffer(self.regions.output.buf, np.float32, x.size).reshape(
            out["shape"])

    async def shm_grpc(self, x: np.ndarray) -> np.ndarray:
        """v2 `ModelInfer` with both tensors in shared memory: small messages each way."""
        from tensorwire import inference as pb
        from tensorwire.wire.oip import params_to_proto

        given, wanted = self._shm_in(x)
        request = pb.ModelInferRequest(model_name="echo")
        params_to_proto(request.inputs.add(name="x", datatype="FP32",
                                           shape=list(x.shape)).parameters, given)
        params_to_proto(request.outputs.add(name="result").parameters, wanted)
        out = pb.ModelInferResponse.FromString(
            await self.v2_infer(request.SerializeToString())).outputs[0]
        return np.frombuffer(self.regions.output.buf, np.float32, x.size).reshape(
            list(out.shape))

    async def tensorwire_json(self, x: np.ndarray) -> np.ndarray:
        import orjson

        body = orjson.dumps(x, option=orjson.OPT_SERIALIZE_NUMPY)
        headers = {"Content-Type": "application/json"}
        async with self.session.post(self.tw_http, data=body, headers=headers) as r:
            return np.array(orjson.loads(await answer(r)), np.float32)

    async def bare_http_echo(self, x: np.ndarray) -> np.ndarray:
        _, body = self.bare_lean.post("/echo", {"Content-Type": "application/octet-stream"},
                                      memoryview(x).cast("B"))
        return np.frombuffer(body, np.float32)


class SharedRegions:
    """The shared-memory wires' input and output regions (/dev/shm objects this client
    creates, as tritonclient's helpers do), registered with the server for each size."""

    def __init__(self, http: LeanHttp, copy_each_call: bool = False) -> None:
        self.http = http
        self.copy_each_call = copy_each_call
        self.input: t.Any = None
        self.output: t.Any = None
        self.names = ("bench_in", "bench_out")
        #: Why the server took no regions (a checkout from before the extension).
        self.refused: str | None = None

    def place(self, x: np.ndarray) -> None:
        np.copyto(np.frombuffer(self.input.buf, x.dtype, x.size), x)

    def prepare(self, x: np.ndarray) -> None:
        """Regions of x's size each, registered (over HTTP; the one worker serves both
        protocols from the same registry), x placed in the input one."""
        from multiprocessing import shared_memory

        import orjson

        self.close()
        nbytes = x.nbytes
        self.input = shared_memory.SharedMemory(create=True, size=nbytes)
        self.output = shared_memory.SharedMemory(create=True, size=nbytes)
        try:
            for name, region in zip(self.names, (self.input, self.output), strict=True):
                self.http.post(f"/v2/systemsharedmemory/region/{name}/register", {},
                               orjson.dumps({"key": "/" + region.name, "offset": 0,
                                             "byte_size": nbytes}))
        except RuntimeError as exc:  # its calls fail, each counted
            self.refused = str(exc)
        self.place(x)

    def close(self) -> None:
        if self.input is None:
            return
        with contextlib.suppress(Exception):  # the server may be gone already
            self.http.post("/v2/systemsharedmemory/unregister", {})
        for region in (self.input, self.output):
            region.close()
            region.unlink()
        self.input = self.output = None


class LeanHttp:
    """HTTP/1.1 over one kept-alive socket with the raw echo's technique: the request
    head and the payload's memory out with `sendall`, the answer's body `recv_into` one
    preallocated buffer. It parses only what it must (status, Content-Length and the
    headers asked for), so the round trip is the server's, not an HTTP client's: an
    aiohttp client gathers and joins a 64 MiB answer itself."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = self._connect()
        self._left = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def post(self, path: str, headers: dict[str, str], *pieces: bytes | memoryview
             ) -> tuple[dict[str, str], memoryview]:
        """(lower-cased headers, body) of a 200 answer; anything else raises."""
        size = sum(memoryview(p).nbytes for p in pieces)
        lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{lines}"
                f"Content-Length: {size}\r\n\r\n").encode()
        self.sock.sendall(head)
        for piece in pieces:
            self.sock.sendall(piece)
        data = self._left
        while b"\r\n\r\n" not in data:
            more = self.sock.recv(1 << 16)
            if not more:
                raise ConnectionError("the server closed the connection")
            data += more
        top, _, rest = data.partition(b"\r\n\r\n")
        status, *fields = top.decode("latin-1").split("\r\n")
        got = {k.strip().lower(): v.strip() for k, _, v in
               (f.partition(":") for f in fields)}
        length = int(got["content-length"])
        body = bytearray(length)
        view = memoryview(body)
        first = min(len(rest), length)
        view[:first] = rest[:first]
        self._left = rest[first:]
        if not recv_exactly(self.sock, view[first:]):
            raise ConnectionError("the server closed the connection mid-answer")
        if got.get("connection", "").lower() == "close":
            self.sock.close()
            self.sock = self._connect()
        if not status.startswith("HTTP/1.1 200"):
            raise RuntimeError(f"{status}: {bytes(view[:200])!r}")
        return got, view

    def close(self) -> None:
        self.sock.close()


async def answer(response: t.Any) -> bytes:
    """The body of a 2xx answer; another status is a failed call."""
    body = await response.read()
    if not 200 <= response.status < 300:
        raise RuntimeError(f"status {response.status}: {body[:200]!r}")
    return body


async def timed(call: t.Callable[[np.ndarray], t.Awaitable[np.ndarray]], x: np.ndarray,
                failures: Failures, server: Served | None = None, cpu: list[int] | None = None
                ) -> float | None:
    """Seconds of one round trip, or None (counted in `failures`) when the call failed
    or did not echo the tensor; the server's CPU nanoseconds during it go to `cpu`."""
    before = server.cpu_ns() if server is not None else 0
    start = time.perf_counter()
    try:
        out = await call(x)
    except Exception as exc:
        failures.exception(exc)
        return None
    elapsed = time.perf_counter() - start
    if server is not None and cpu is not None:
        cpu.append(server.cpu_ns() - before)
    if out.size != x.size or not np.array_equal(out.reshape(-1), x.reshape(-1)):
        failures.add("wrong answer", f"{call.__name__} did not echo the tensor")
        return None
    return elapsed


async def peak_buffers(clients: Clients, wire: str, x: np.ndarray, failures: Failures
                       ) -> float:
    """Payload-sized buffers alive at the peak of one call on `wire` (see the module
    docstring): tracemalloc's peak during the call plus the pooled buffers it was lent."""
    server = clients.servers[wire]
    server.command("trace")
    await timed(clients.call(wire), x, failures)
    line = server.command("peak") or ""
    _, peak, reused = line.split()
    return (int(peak) + int(reused) * x.nbytes) / x.nbytes


async def measure(clients: Clients, sizes: list[int], rounds: int, json_rounds: int
                  ) -> dict[str, t.Any]:
    results: dict[str, t.Any] = {}
    rng = np.random.default_rng(0)
    for mib in sizes:
        x = rng.standard_normal(mib * MiB // 4, dtype=np.float32)
        clients.regions.prepare(x)
        samples: dict[str, list[float | None]] = {w: [] for w in WIRES}
        cpu: dict[str, list[int]] = {w: [] for w in (*WIRES, "tensorwire_json")}
        failures = {w: Failures() for w in (*WIRES, "tensorwire_json")}
        for wire in WIRES:  # warm-up (its failures count too)
            await timed(clients.call(wire), x, failures[wire])
        n = max(3, rounds if mib < 64 else rounds // 2)
        for _ in range(n):
            for wire in WIRES:
                samples[wire].append(await timed(clients.call(wire), x, failures[wire],
                                                 clients.servers[wire], cpu[wire]))
        json_n = max(1, json_rounds if mib == 1 else json_rounds // 3)
        samples["tensorwire_json"] = [
            await timed(clients.tensorwire_json, x, failures["tensorwire_json"],
                        clients.servers["tensorwire_json"], cpu["tensorwire_json"])
            for _ in range(json_n)]
        peaks = {w: await peak_buffers(clients, w, x, failures[w]) for w in WIRES}
        row: dict[str, t.Any] = {}
        mb = x.nbytes / 1e6
        for name, values in samples.items():
            ok = [v for v in values if v is not None]
            median = statistics.median(ok) if ok else float("nan")
            row[name] = {"median_ms": median * 1e3, "mb_per_s": mb / median,
                         "cpu_ms_per_mb": (statistics.median(cpu[name]) / 1e6 / mb
                                           if cpu[name] else float("nan")),
                         "samples": len(ok), **failures[name].report()}
            if name in peaks:
                row[name]["peak_buffers"] = peaks[name]
        raw = row["raw"]
        for name in (*WIRES[1:], "tensorwire_json"):
            row[name]["vs_raw"] = row[name]["mb_per_s"] / raw["mb_per_s"]
            row[name]["cpu_vs_raw"] = row[name]["cpu_ms_per_mb"] / raw["cpu_ms_per_mb"]
        for name, socket_path in SHM_PAIRS.items():
            row[name]["vs_socket"] = row[name]["mb_per_s"] / row[socket_path]["mb_per_s"]
        row["ratio_grpc"] = row["tensorwire_grpc"]["mb_per_s"] / row["bare_grpc"]["mb_per_s"]
        row["ratio_npy"] = row["tensorwire_npy"]["mb_per_s"] / row["bare_http"]["mb_per_s"]
        row["ratio_json"] = (row["tensorwire_json"]["mb_per_s"]
                             / row["bare_http"]["mb_per_s"])
        results[f"{mib}MiB"] = row
        print_row(mib, row)
    return results


def print_header() -> None:
    print(f"{'size':>6} {'wire':<18} {'MB/s':>8} {'x raw':>6} {'CPU ms/MB':>9} "
          f"{'x raw':>6} {'peak bufs':>9} {'failed':>6}")


def print_row(mib: int, row: dict[str, t.Any]) -> None:
    for name in (*WIRES, "tensorwire_json"):
        r = row[name]
        print(f"{mib:>4}Mi {name:<18} {r['mb_per_s']:8.1f} {r.get('vs_raw', 1.0):6.2f} "
              f"{r['cpu_ms_per_mb']:9.3f} {r.get('cpu_vs_raw', 1.0):6.2f} "
              f"{r.get('peak_buffers', float('nan')):9.2f} {r['errors']:6d}"
              f"{'  first: ' + str(r['first_error']) if r['errors'] else ''}"
              f"{socket_ratio(r)}", flush=True)


def socket_ratio(r: dict[str, t.Any]) -> str:
    """A shared-memory wire's MB/s over its socket path's, printed after its row."""
    return f"  {r['vs_socket']:.1f}x its socket path" if "vs_socket" in r else ""


async def run(sizes: list[int], rounds: int, json_rounds: int, loop: str,
              shm_copy: bool = False) -> dict[str, t.Any]:
    servers: list[Served] = []
    try:
        tw = Served("tensorwire", loop)
        servers.append(tw)
        servers += [Served("grpc"), Served("http"), Served("raw")]
        clients = Clients(tw, *servers[1:], shm_copy=shm_copy)
        try:
            print_header()
            return await measure(clients, sizes, rounds, json_rounds)
        finally:
            await clients.close()
    finally:
        for server in servers:
            server.stop()


def targets_of(results: dict[str, t.Any]) -> dict[str, dict[str, bool]]:
    """Issue 37's targets at 16 and 64 MiB, each met only with no failed call."""
    out = {}
    for size, row in results.items():
        if int(size.removesuffix("MiB")) < 16:
            continue
        checks = {}
        for wire in ("tensorwire_npy", "tensorwire_v2"):
            failed = row[wire]["errors"] + row["raw"]["errors"]
            short = wire.removeprefix("tensorwire_")
            checks[f"{short} >= 0.5x raw MB/s"] = target_met(row[wire]["vs_raw"] >= 0.5,
                                                              failed)
            checks[f"{short} CPU/MB <= 2x raw"] = target_met(row[wire]["cpu_vs_raw"] <= 2,
                                                              failed)
            checks[f"{short} <= 1 buffer per direction"] = target_met(
                row[wire]["peak_buffers"] <= 2.05, failed)
        if size == "64MiB":
            for wire, socket_path in SHM_PAIRS.items():
                failed = row[wire]["errors"] + row[socket_path]["errors"]
                checks[f"{wire} >= 5x {socket_path}"] = target_met(
                    row[wire]["vs_socket"] >= 5, failed)
        out[size] = checks
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", choices=sorted(SERVERS), help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="1,16,64", help="MiB, comma-separated")
    parser.add_argument("--rounds", type=int, default=10,
                        help="rounds per size (halved at 64 MiB)")
    parser.add_argument("--json-rounds", type=int, default=3)
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="asyncio",
                        help="tensorwire's event loop (the bare servers run on asyncio)")
    parser.add_argument("--shm-copy", action="store_true",
                        help="the shared-memory wires copy the tensor into the region on "
                             "every call (timed), not once per size")
    parser.add_argument("--no-write", action="store_true", help="do not write results JSON")
    args = parser.parse_args()
    if args.serve:
        from tensorwire.ops.loops import new_loop

        loop = args.loop if args.serve == "tensorwire" else "asyncio"
        with asyncio.Runner(loop_factory=lambda: new_loop(loop)) as runner:
            runner.run(SERVERS[args.serve]())
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = asyncio.run(run(sizes, args.rounds, args.json_rounds, args.loop,
                              args.shm_copy))
    targets = targets_of(results)
    failed_total = sum(row[w]["errors"] for k, row in results.items() if k in targets
                       for w in ("raw", "tensorwire_npy", "tensorwire_v2", *SHM_PAIRS,
                                 *SHM_PAIRS.values()))
    met = all(all(v.values()) for v in targets.values())
    print("targets (16 and 64 MiB: npy and v2 >= 0.5x raw MB/s, CPU/MB <= 2x raw, "
          "<= 1 buffer per direction; 64 MiB: shared memory >= 5x its socket path):",
          verdict(met, failed_total) if targets else "not measured (no size >= 16 MiB)",
          "" if met else {k: [n for n, ok in v.items() if not ok] for k, v in targets.items()})
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({
            "command": "python bench/tensor_roundtrip.py " + " ".join(sys.argv[1:]),
            "machine": machine_info() | {"platform": platform.platform()},
            "loop": args.loop,
            "shm_input": "copied in on every call" if args.shm_copy else
                         "placed in the region once per size",
            "unit": "MB/s = payload bytes one way / median round trip, 1 MB = 1e6 bytes; "
                    "cpu_ms_per_mb = server CPU (all threads) per payload MB, median call; "
                    "peak_buffers = payload-sized buffers alive at the peak of one call "
                    "(tracemalloc + pooled buffers lent)",
            "results": results, "targets_met": targets,
        }, indent=2) + "\n")
        print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
