"""No request leaves a file behind: good, bad, failing and aborted requests, both protocols.

The aborted ones are the hard part: an HTTP client that hangs up halfway through an
upload, one that leaves while the method runs, a gRPC call cancelled while an async
method awaits and while a sync method runs on in its thread (whose files must survive
until it returns, then go).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import threading
import time
import typing as t
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

import tensorwire
from tensorwire.validators import ContentType
from tests.support.grpc_calls import GrpcCaller
from tests.support.servers import serving
from tests.support.uploads import call, field, file

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 100


@tensorwire.service
class Holder:
    """Methods that keep files in their request's temp dir for a while."""

    sync_results: t.ClassVar[list[str]] = []

    @tensorwire.api
    async def hold(self, upload: Path, seconds: float = 0.0, *,
                   ctx: tensorwire.Context) -> int:
        (ctx.temp_dir / "scratch.bin").write_bytes(b"s" * 1000)
        await asyncio.sleep(seconds)
        return upload.stat().st_size

    @tensorwire.api
    def hold_sync(self, upload: Path, seconds: float = 0.0, *,
                  ctx: tensorwire.Context) -> int:
        (ctx.temp_dir / "scratch.bin").write_bytes(b"s")
        time.sleep(seconds)
        try:  # still there: the request's cleanup waits for this thread
            (ctx.temp_dir / "after.bin").write_bytes(upload.read_bytes())
            Holder.sync_results.append("wrote")
        except OSError as exc:
            Holder.sync_results.append(f"failed: {exc}")
        return upload.stat().st_size

    @tensorwire.api
    def text_only(self, doc: t.Annotated[Path, ContentType("text/*")]) -> int:
        return len(doc.read_text())

    @tensorwire.api
    def big(self, size: int, *, ctx: tensorwire.Context) -> Path:
        out = ctx.temp_dir / "big.bin"
        with open(out, "wb") as f:
            f.truncate(size)  # sparse: large without costing disk
        return out

    @tensorwire.api
    def explode(self, upload: Path, *, ctx: tensorwire.Context) -> int:
        (ctx.temp_dir / "half-written.bin").write_bytes(b"x")
        raise RuntimeError("user code failed")


def _listing(folder: Path) -> list[Path]:
    """A folder's entries, or none when the server removed it while we looked."""
    try:
        return list(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def leftovers(root: Path) -> list[Path]:
    return [p for base in _listing(root) for p in _listing(base)]


def wait_for(predicate: t.Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def scratch_files(root: Path) -> list[Path]:
    return [p for d in leftovers(root) for p in _listing(d) if p.name == "scratch.bin"]


def hang_up_mid_upload(port: int, route: str, root: Path) -> None:
    """Declare a 10 MB multipart body, send 300 kB of it, wait until it is spooling, hang up."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        head = (b'--XX\r\nContent-Disposition: form-data; name="upload"; filename="a.bin"'
                b"\r\nContent-Type: application/octet-stream\r\n\r\n")
        s.sendall(b"POST " + route.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: multipart/form-data; boundary=XX\r\n"
                  b"Content-Length: 10000000\r\n\r\n" + head + b"\x00" * 300_000)
        assert wait_for(lambda: any(leftovers(root)))  # the upload is being written
    # the socket is closed here, mid-body


def hang_up_while_running(port: int, root: Path) -> None:
    """Send a whole request to a method that sleeps, and leave before the answer."""
    body = (b'--XX\r\nContent-Disposition: form-data; name="upload"; filename="a.bin"\r\n\r\n'
            b"data\r\n--XX\r\nContent-Disposition: form-data; name=\"seconds\"\r\n\r\n"
            b"0.5\r\n--XX--\r\n")
    assert wait_for(lambda: not scratch_files(root))  # none left from an earlier call
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /hold HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: multipart/form-data; boundary=XX\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        assert wait_for(lambda: bool(scratch_files(root)))


def hang_up_mid_download(port: int) -> None:
    """Ask for a 1 GB file response, read its first bytes, leave."""
    body = b'{"size": 1000000000}'
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /big HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        head = s.recv(4096)
        assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: 1000000000" in head


def grpc_cancel(server: t.Any, api: str, root: Path) -> None:
    assert wait_for(lambda: not scratch_files(root))  # so the one we see is this call's
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        messages = caller.proto.messages[api]
        msg = messages.request({"seconds": 3.0})
        msg.upload.content = b"payload"
        method = caller.channel.unary_unary(
            caller.proto.method_names[api], request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=messages.response_cls.FromString)
        future = method.future(msg, timeout=30)
        assert wait_for(lambda: bool(scratch_files(root)))
        future.cancel()
        with pytest.raises(grpc.FutureCancelledError):
            future.result()


def test_mixed_run_leaves_nothing(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    Holder.sync_results.clear()
    with serving(Holder, temp_dir=str(root)) as server:
        # Good ones, both protocols.
        for protocol in ("aiohttp", "grpc"):
            assert call(protocol, server, "hold", [file("upload", PNG, "a.png")]).value == 108
            assert call(protocol, server, "hold_sync", [file("upload", b"12345")]).value == 5
            assert call(protocol, server, "text_only", [file("doc", b"hello", "a.txt")]).ok
        # Bad ones: refused after the upload was spooled to disk.
        for protocol in ("aiohttp", "grpc"):
            reply = call(protocol, server, "text_only", [file("doc", PNG, "a.txt")])
            assert reply.status in (415, "INVALID_ARGUMENT"), reply
            reply = call(protocol, server, "hold", [field("seconds", 1.0)])
            assert reply.status in (400, "INVALID_ARGUMENT"), reply
            reply = call(protocol, server, "explode", [file("upload", PNG)])
            assert reply.status in (500, "INTERNAL"), reply
            assert "user code failed" not in reply.error
        # A bad field after the file was spooled (gRPC's client cannot even encode it).
        reply = call("aiohttp", server, "hold", [file("upload", PNG), field("seconds", "soon")])
        assert reply.status == 400 and reply.locs == [["seconds"]], reply
        # Aborted ones.
        hang_up_mid_upload(server.http_port, "/hold", root)
        hang_up_while_running(server.http_port, root)
        hang_up_mid_download(server.http_port)
        grpc_cancel(server, "hold", root)
        grpc_cancel(server, "hold_sync", root)
        # The cancelled sync method still runs (3 s) and still has its files.
        assert scratch_files(root), "cleanup must wait for the method's thread"
        assert wait_for(lambda: not leftovers(root), timeout=15), leftovers(root)
        assert Holder.sync_results == ["wrote", "wrote", "wrote"]
        # And the server is fine.
        assert call("grpc", server, "hold", [file("upload", b"ok")]).value == 2
        assert leftovers(root) == []
    assert list(root.iterdir()) == []  # shutdown removed the per-worker base too


def test_uploads_run_concurrently_in_separate_dirs(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    with serving(Holder, temp_dir=str(root)) as server:
        results: list[t.Any] = []

        def one(i: int) -> None:
            results.append(call("aiohttp" if i % 2 else "grpc", server, "hold",
                                [file("upload", b"x" * i), field("seconds", 0.2)]).value)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(1, 9)]
        for th in threads:
            th.start()
        assert wait_for(lambda: len(scratch_files(root)) >= 4)
        for th in threads:
            th.join(30)
        assert sorted(results) == list(range(1, 9))
        assert wait_for(lambda: not leftovers(root))


# ------------------------------------------------------------------ a full disk
#: The small filesystem a server's temp dir lives on in the full-disk test.
FULL_DISK = "256k"
_MOUNT = 'mount -t tmpfs -o size=' + FULL_DISK + ' tmpfs "$0" && exec "$@"'


def _tmpfs_wrap(root: Path) -> tuple[str, ...]:
    """A command that runs the server in its own mount namespace with `root` a
    FULL_DISK tmpfs (a user namespace makes it work without privileges); skips the
    test where this system allows neither."""
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", _MOUNT, str(root), "true"],
                           capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"no tmpfs in a mount namespace here: {probe.stderr.strip()}")
    return ("unshare", "-rm", "sh", "-c", _MOUNT, str(root))


def test_a_full_disk_is_507_and_resource_exhausted_leaving_nothing(tmp_path: Path) -> None:
    """Uploads spooled to, and files written in, a temp dir on a full filesystem: a 507
    naming the cause with the request id over HTTP, RESOURCE_EXHAUSTED over gRPC and
    the Open Inference Protocol's two routes; the space comes back at once."""
    from tritonclient.utils import InferenceServerException

    from tests.support.disk_service import Keeper
    from tests.support.servers import spawn_cli
    from tests.support.v2_calls import infer, texts

    root = tmp_path / "tmp"
    root.mkdir()
    server = spawn_cli("tests.support.disk_service:Keeper", wrap=_tmpfs_wrap(root),
                       env={"TENSORWIRE_TEMP_DIR": str(root)}, drain_output=True)
    server.spec = tensorwire.get_service_spec(Keeper)
    assert server.process is not None
    inside = Path(f"/proc/{server.process.pid}/root") / root.relative_to("/")
    big = b"\x00" * 1_000_000  # four times the filesystem
    try:
        # Native HTTP: an upload spooled to disk, and a file the method writes.
        for protocol in ("aiohttp", "curl"):
            reply = call(protocol, server, "keep", [file("upload", big)])
            assert reply.status == 507, reply
            assert "no space left on device" in reply.error, reply
            assert str(root) not in reply.error  # no server path on the wire
        resp = requests_post(server.http_url + "/scratch", {"size": 1_000_000})
        assert resp["status"] == 507, resp
        assert resp["json"]["request_id"] == resp["headers"]["X-Request-ID"], resp
        assert resp["headers"]["x-tensorwire-error"] == "InsufficientStorage"
        assert "no space left on device" in resp["json"]["error"], resp
        # gRPC.
        reply = call("grpc", server, "keep", [file("upload", big)])
        assert reply.status == "RESOURCE_EXHAUSTED", reply
        assert "no space left on device" in reply.error, reply
        # The Open Inference Protocol, both routes.
        with pytest.raises(InferenceServerException) as info:
            infer("http-binary", server, "keep", {"upload": texts(big)})
        assert info.value.status() == "507" and "no space left" in str(info.value)
        with pytest.raises(InferenceServerException) as info:
            infer("grpc", server, "keep", {"upload": texts(big)})
        assert info.value.status() == "StatusCode.RESOURCE_EXHAUSTED", info.value
        # Nothing left behind: no request dir, and room again for a small upload.
        assert wait_for(lambda: not leftovers(inside)), leftovers(inside)
        small = b"\x01" * 100_000
        for protocol in ("aiohttp", "grpc"):
            assert call(protocol, server, "keep", [file("upload", small)]).value == 100_000
        assert infer("grpc", server, "keep", {"upload": texts(small)}).outputs
        assert wait_for(lambda: not leftovers(inside)), leftovers(inside)
        assert "Traceback" in server.output()  # the log keeps the whole story
    finally:
        server.stop()


def requests_post(url: str, body: t.Any) -> dict[str, t.Any]:
    """POST a JSON body; status, headers and the JSON answer."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return {"status": resp.status, "headers": dict(resp.headers),
                    "json": json.loads(resp.read())}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "headers": dict(exc.headers),
                "json": json.loads(exc.read())}
