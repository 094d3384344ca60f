"""File upload/download and image round trips: tensorwire beside a bare aiohttp app.

    .venv/bin/python bench/files.py [--size-mib 16] [--rounds 20]

Both servers run in this process on loopback, each on its own event loop thread, and
are driven by the same aiohttp client one request at a time, so the numbers compare
the per-request work: tensorwire's (multipart parsing, spooling into a per-request temp
dir, media-type sniffing, validation, cleanup; streaming a file response) against the
least a hand-written handler does for the same job. One run; medians of the calls that
succeeded printed, each job's failed calls beside them (an error status, a wrong size,
any exception: counted, never timed).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import sys
import tempfile
import threading
import time
import typing as t
from pathlib import Path

from aiohttp import ClientSession, FormData, web
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorwire
from bench.support.common import Failures
from tests.support.servers import serving

MiB = 1024 * 1024


@tensorwire.service
class FileBench:
    def __init__(self) -> None:
        self.download = Path(tempfile.mkdtemp()) / "download.bin"

    @tensorwire.api
    def upload(self, file: Path) -> int:
        return file.stat().st_size

    @tensorwire.api
    def fetch(self, size: int) -> Path:
        if not self.download.exists() or self.download.stat().st_size != size:
            self.download.write_bytes(os.urandom(size))
        return self.download

    @tensorwire.api
    def thumb(self, image: Image.Image) -> Image.Image:
        out = image.resize((64, 64))
        out.format = image.format
        return out


def bare_app(download: Path) -> web.Application:
    """The baseline: what a hand-written aiohttp handler does for the same three jobs."""

    async def upload(request: web.Request) -> web.Response:
        reader = await request.multipart()
        part = await reader.next()
        with tempfile.NamedTemporaryFile() as f:
            size = 0
            while chunk := await part.read_chunk(256 * 1024):  # type: ignore[union-attr]
                f.write(chunk)
                size += len(chunk)
        return web.json_response(size)

    async def fetch(request: web.Request) -> web.StreamResponse:
        return web.FileResponse(download)

    async def thumb(request: web.Request) -> web.Response:
        reader = await request.multipart()
        part = await reader.next()
        image = Image.open(io.BytesIO(await part.read()))  # type: ignore[union-attr]
        buf = io.BytesIO()
        image.resize((64, 64)).save(buf, image.format)
        return web.Response(body=buf.getvalue(), content_type="image/jpeg")

    app = web.Application(client_max_size=1024 * MiB)
    app.router.add_post("/upload", upload)
    app.router.add_post("/fetch", fetch)
    app.router.add_post("/thumb", thumb)
    return app


def run_bare(download: Path) -> tuple[str, t.Callable[[], None]]:
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, t.Any] = {}

    def main() -> None:
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(bare_app(download), access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        box["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        box["runner"] = runner
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(30)

    def stop() -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)

    return f"http://127.0.0.1:{box['port']}", stop


async def timed(rounds: int, send: t.Callable[[], t.Awaitable[None]]
                ) -> tuple[float, Failures]:
    """Median seconds of the calls that succeeded, and the failed ones (warm-up too)."""
    failures = Failures()
    times = []
    for i in range(rounds + 1):  # the first is the warm-up
        start = time.perf_counter()
        try:
            await send()
        except Exception as exc:
            failures.exception(exc)
            continue
        if i:
            times.append(time.perf_counter() - start)
    return (statistics.median(times) if times else float("nan")), failures


def expect(ok: bool, what: str) -> None:
    """A wrong answer is a failed call, whatever `python -O` does to asserts."""
    if not ok:
        raise RuntimeError(what)


async def measure(base: str, payload: bytes, image: bytes, rounds: int, size: int,
                  tensorwire_side: bool) -> dict[str, tuple[float, Failures]]:
    async with ClientSession() as s:
        async def upload() -> None:
            form = FormData()
            form.add_field("file", payload, filename="blob.bin",
                           content_type="application/octet-stream")
            async with s.post(base + "/upload", data=form) as r:
                text = await r.text()
                expect(r.status == 200, f"status {r.status}: {text[:200]}")
                expect(int(text) == len(payload), f"{text} bytes stored of {len(payload)}")

        async def fetch() -> None:
            kwargs: dict[str, t.Any] = {"json": {"size": size}} if tensorwire_side else {}
            async with s.post(base + "/fetch", **kwargs) as r:
                expect(r.status == 200, f"status {r.status}")
                got = 0
                async for chunk in r.content.iter_chunked(1024 * 1024):
                    got += len(chunk)
                expect(got == size, f"{got} bytes of {size}")

        async def thumb() -> None:
            form = FormData()
            form.add_field("image", image, filename="p.jpg", content_type="image/jpeg")
            async with s.post(base + "/thumb", data=form) as r:
                await r.read()
                expect(r.status == 200, f"status {r.status}")

        return {"upload": await timed(rounds, upload), "download": await timed(rounds, fetch),
                "image": await timed(rounds, thumb)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    size = args.size_mib * MiB
    payload = os.urandom(size)
    buf = io.BytesIO()
    Image.new("RGB", (1024, 768), "teal").save(buf, "JPEG")
    image = buf.getvalue()
    download = Path(tempfile.mkdtemp()) / "download.bin"
    download.write_bytes(os.urandom(size))

    with serving(FileBench, max_request_size=2 * size + MiB) as server:
        tw = asyncio.run(measure(server.http_url, payload, image, args.rounds, size, True))
    bare_url, stop = run_bare(download)
    try:
        bare = asyncio.run(measure(bare_url, payload, image, args.rounds, size, False))
    finally:
        stop()
    print(f"{args.size_mib} MiB file, 1024x768 JPEG, {args.rounds} rounds, median per request")
    print(f"{'job':<10}{'tensorwire':>14}{'failed':>7}{'bare aiohttp':>14}{'failed':>7}"
          f"{'ratio':>8}")
    for job in ("upload", "download", "image"):
        (tw_s, tw_f), (bare_s, bare_f) = tw[job], bare[job]
        print(f"{job:<10}{tw_s * 1e3:>12.1f}ms{tw_f.total:>7d}{bare_s * 1e3:>12.1f}ms"
              f"{bare_f.total:>7d}{tw_s / bare_s:>8.2f}")
        for side, f in (("tensorwire", tw_f), ("bare", bare_f)):
            if f.first:
                print(f"  {side} {job}: first failure: {f.first}")
    for job in ("upload", "download"):
        print(f"{job} throughput: tensorwire {size / tw[job][0] / MiB:.0f} MiB/s, "
              f"bare {size / bare[job][0] / MiB:.0f} MiB/s")


if __name__ == "__main__":
    main()
