"""Client behaviour around the calls: connection reuse, threads, options, lifecycle."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from pydantic import BaseModel

import tensorwire
from examples.llm_stream import LanguageModel
from examples.models import ReviewAnalyzer
from examples.quickstart import Quickstart
from tensorwire.client.channels import DEFAULT_CHANNELS
from tests.support.servers import ROOT, url_of

from .services import Kitchen

PROTOCOLS = ["http", "grpc"]


def established_to(port: int) -> int:
    """TCP connections in ESTABLISHED state whose remote port is `port` (Linux)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote, state = fields[2], fields[3]
            if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def settled_to(port: int) -> int:
    """established_to once connections left by an earlier test have finished closing
    (a closed channel's sockets go down on grpc's own threads, a moment later)."""
    last, deadline = established_to(port), time.monotonic() + 3.0
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = established_to(port)
        if now == last:
            return now
        last = now
    return last


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc/net/tcp")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_connection_is_reused_for_sequential_calls(servers, protocol):
    """HTTP: one keep-alive connection. gRPC: the pool's channels (DEFAULT_CHANNELS
    connections, opened on connect) carry every call; none is opened per call."""
    server = servers[Quickstart]
    port = server.http_port if protocol == "http" else server.grpc_port
    before = settled_to(port)
    with tensorwire.SyncClient(url_of(server, protocol)) as client:
        for i in range(30):
            assert client.upper(f"x{i}") == f"X{i}"
            assert list(client.spell(word="ab")) == ["a", "b"]
        assert established_to(port) - before == (1 if protocol == "http"
                                                 else DEFAULT_CHANNELS)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_sync_client_is_shared_by_many_threads(servers, protocol):
    """16 threads x 25 mixed calls (unary, root, stream) on one client, all correct."""
    server = servers[Quickstart]
    port = server.http_port if protocol == "http" else server.grpc_port
    before = settled_to(port)
    errors: list[BaseException] = []
    with tensorwire.SyncClient(url_of(server, protocol)) as client:
        def work(n: int) -> list[tuple]:
            out = []
            for i in range(25):
                text = f"t{n} w{i} z"
                out.append((client.summarize(text=text, max_words=2),
                            {"summary": f"t{n} w{i}", "words": 3}))
                out.append((client.upper(text), text.upper()))
                if i % 5 == 0:
                    out.append((list(client.spell(word=f"{n}{i}")), list(f"{n}{i}")))
            return out

        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(work, n) for n in range(16)]
            results = []
            for f in futures:
                try:
                    results.extend(f.result())
                except BaseException as exc:  # pragma: no cover - reported below
                    errors.append(exc)
        opened = established_to(port) - before
    assert not errors
    assert len(results) == 16 * (50 + 5)
    for got, want in results:
        assert got == want
    if protocol == "grpc":
        # the pool's few connections carry every call: never one per thread or per call
        assert opened <= DEFAULT_CHANNELS


def test_clients_opened_one_after_another_print_nothing(servers):
    """SyncClients share one loop that is never closed: a program opening client after
    client gets no grpc.aio "Event loop is closed" tracebacks (with a loop per client,
    closed with it, a third client printed 16: the first client's channels' late
    completions, delivered to its closed loop), and a closed client's call is a
    RuntimeError."""
    url = url_of(servers[Quickstart], "grpc")
    program = (
        "import tensorwire\n"
        "for i in range(4):\n"
        f"    with tensorwire.SyncClient({url!r}) as client:\n"
        "        assert client.upper('ab') == 'AB'\n"
        "try:\n"
        "    client.upper('ab')\n"
        "except RuntimeError as exc:\n"
        "    assert 'closed' in str(exc)\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_many_tasks_share_an_async_client(servers, protocol):
    async def main() -> list[str]:
        async with tensorwire.AsyncClient(url_of(servers[Quickstart], protocol)) as client:
            return await asyncio.gather(*(client.upper(f"a{i}") for i in range(100)))

    assert asyncio.run(main()) == [f"A{i}" for i in range(100)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_list_apis_and_is_ready(servers, protocol):
    with tensorwire.SyncClient(url_of(servers[ReviewAnalyzer], protocol)) as client:
        apis = {a.name: a for a in client.list_apis()}
        assert list(apis) == ["analyze", "search", "shout", "stats", "fail"]
        assert list(apis["search"].inputs) == ["query", "top_k", "mode"]
        assert apis["search"].root_input is False
        assert apis["shout"].root_input is True  # both contracts mark root inputs
        assert apis["analyze"].root_input is False  # a single field, not a root input
        assert "exact" in apis["search"].inputs["mode"]
        assert client.is_ready() is True
        assert {"analyze", "search"} <= set(dir(client))
        assert apis["search"].required == ("query",)  # top_k and mode have defaults
        assert apis["shout"].required == ("text",)  # a root input without a default
        if protocol == "http":
            assert apis["analyze"].doc.startswith("Score one review")
        with tensorwire.SyncClient(url_of(servers[LanguageModel], protocol)) as llm:
            assert all(a.stream for a in llm.list_apis())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_output_types_rebuild_models(servers, protocol):
    class Analysis(BaseModel):
        sentiment: str
        score: float
        words: int

    url = url_of(servers[ReviewAnalyzer], protocol)
    with tensorwire.SyncClient(url, output_types={"analyze": Analysis}) as client:
        out = client.analyze(params={"text": "a b c", "stars": 4})
        assert isinstance(out, Analysis) and out.words == 3 and out.sentiment == "positive"
        plain = client.with_options(output_types={"analyze": dict}).analyze(
            params={"text": "a", "stars": 4})
        assert plain["sentiment"] == "positive"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_headers_and_token_reach_the_server(servers, protocol):
    url = url_of(servers[Kitchen], protocol)
    with tensorwire.SyncClient(url, headers={"X-Demo-A": "1"}, token="s3cret") as client:
        assert client.headers()["x-demo-a"] == "1"
        assert client.headers()["authorization"] == "Bearer s3cret"
        view = client.with_options(headers={"X-Demo-B": "2"})
        seen = view.headers()
        assert seen["x-demo-a"] == "1" and seen["x-demo-b"] == "2"
        assert "x-demo-b" not in client.headers()  # the client itself is unchanged
        view.close()  # closing a view does nothing
        assert client.maybe(value=1) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bytes_travel_raw_and_outputs_go_to_the_files_dir(servers, protocol, tmp_path):
    url = url_of(servers[Kitchen], protocol)
    blob = bytes(range(256)) * 1000
    with tensorwire.SyncClient(url, files_dir=tmp_path) as client:
        assert client.digest(data=blob)["size"] == len(blob)
        assert client.raw_size(blob) == len(blob)
        assert client.echo_bytes(data=blob) == blob[::-1]
        src = tmp_path / "in.bin"
        src.write_bytes(b"from a file")
        assert client.digest(data=src)["size"] == 11           # a Path is read for you
        with open(src, "rb") as f:
            assert client.digest(data=f)["size"] == 11         # so is an open file
    assert tmp_path.exists()  # a directory the caller gave is never removed


def test_closing_removes_the_private_file_directory(servers):
    client = tensorwire.SyncClient(servers[Kitchen].http_url)
    folder = client._async._files.directory
    saved = client._async._files.save_bytes(b"x", "out.txt", "text/plain")
    assert saved.parent.parent == folder and saved.read_bytes() == b"x"
    client.close()
    assert not folder.exists()
    with pytest.raises(RuntimeError, match="closed"):
        client.maybe(value=1)
    client.close()  # idempotent


def test_async_client_must_be_connected_first(servers):
    client = tensorwire.AsyncClient(servers[Quickstart].http_url)
    with pytest.raises(AttributeError, match="once the client is connected"):
        client.upper  # noqa: B018
    with pytest.raises(RuntimeError, match="not connected"):
        client.list_apis()

    async def main() -> str:
        connected = await tensorwire.AsyncClient.connect(servers[Quickstart].http_url)
        try:
            stream = await connected.spell(word="ok")  # awaiting opens the stream
            return "".join([c async for c in stream]) + await connected.upper("!")
        finally:
            await connected.close()

    assert asyncio.run(main()) == "ok!"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_leaving_a_stream_early_closes_it(servers, protocol):
    with tensorwire.SyncClient(url_of(servers[LanguageModel], protocol)) as client:
        stream = client.generate(prompt="p", max_tokens=1000, delay=0.01)
        first = next(stream)
        stream.close()
        assert first.strip() in {"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"}
        with client.generate(prompt="p", max_tokens=3) as s:
            assert len(list(s)) == 3
        assert len(list(client.agenerate(prompt="still fine", max_tokens=2))) == 2


def test_sync_client_refuses_calls_from_its_own_loop(servers):
    with tensorwire.SyncClient(servers[Quickstart].http_url) as client:
        box: dict[str, BaseException] = {}

        def inside() -> None:
            try:
                client.upper("x")
            except BaseException as exc:
                box["exc"] = exc

        done = threading.Event()
        client._loop.loop.call_soon_threadsafe(lambda: (inside(), done.set()))
        assert done.wait(10)
        assert isinstance(box["exc"], RuntimeError)
        assert "AsyncClient" in str(box["exc"])


def test_import_stays_light_and_the_client_loads_no_framework(servers):
    """`import tensorwire` loads no client code; using a client loads no PIL/pandas/torch."""
    import subprocess
    import sys

    code = (
        "import sys, tensorwire\n"
        "assert 'tensorwire.client' not in sys.modules\n"
        "with tensorwire.SyncClient(sys.argv[1]) as c:\n"
        "    assert c.summarize(text='a b') == {'summary': 'a b', 'words': 2}\n"
        "assert 'tensorwire.client' in sys.modules\n"
        "heavy = [m for m in ('PIL', 'pandas', 'torch', 'tensorflow') if m in sys.modules]\n"
        "assert not heavy, heavy\n")
    for url in (servers[Quickstart].http_url, url_of(servers[Quickstart], "grpc")):
        proc = subprocess.run([sys.executable, "-c", code, url], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


def test_bad_urls_are_rejected():
    for url in ("localhost:3000", "ftp://x", "grpc://host/path", "http://:3000"):
        with pytest.raises(ValueError):
            tensorwire.SyncClient(url)
