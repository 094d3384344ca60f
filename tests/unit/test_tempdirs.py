"""Per-request temp directories: lazily made, private, and gone when the request ends."""

from __future__ import annotations

import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tensorwire.codecs import REPLY
from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.tempdirs import TempDirs


def _ctx(pool: TempDirs) -> Context:
    return Context(RequestInfo("http", "api", Headers()), temp_dirs=pool)


def test_nothing_is_made_until_used(tmp_path: Path) -> None:
    pool = TempDirs(tmp_path)
    ctx = _ctx(pool)
    ctx.close()
    assert list(tmp_path.iterdir()) == []


def test_each_request_gets_its_own_private_dir_removed_on_close(tmp_path: Path) -> None:
    pool = TempDirs(tmp_path)
    a, b = _ctx(pool), _ctx(pool)
    (a.temp_dir / "x.bin").write_bytes(b"1")
    (b.temp_dir / "sub").mkdir()
    assert a.temp_dir != b.temp_dir
    assert a.temp_dir.parent == b.temp_dir.parent == pool.base
    assert pool.base.parent == tmp_path
    assert pool.base.name.startswith(f"tensorwire-{os.getpid()}-")
    assert stat.S_IMODE(a.temp_dir.stat().st_mode) == 0o700
    assert len(pool.in_use()) == 2
    a.close()
    b.close()
    assert pool.in_use() == []
    pool.close()
    assert list(tmp_path.iterdir()) == []


def test_temp_dir_after_the_request_ended_is_an_error(tmp_path: Path) -> None:
    ctx = _ctx(TempDirs(tmp_path))
    ctx.close()
    with pytest.raises(RuntimeError, match="ended"):
        _ = ctx.temp_dir


def test_close_waits_for_a_cancelled_method_still_running(tmp_path: Path) -> None:
    pool = TempDirs(tmp_path)
    ctx = _ctx(pool)
    release = threading.Event()
    written = threading.Event()

    def method() -> None:
        (ctx.temp_dir / "out.txt").write_text("partial")
        written.set()
        release.wait(10)
        (ctx.temp_dir / "out.txt").write_text("done")  # must not fail: dir still there

    with ThreadPoolExecutor(1) as ex:
        future = ex.submit(method)
        written.wait(10)
        ctx.close_after(future)
        ctx.close()  # the request ended (cancelled) while the thread runs on
        assert len(pool.in_use()) == 1
        release.set()
        future.result(10)
    assert pool.in_use() == []


def test_root_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORWIRE_TEMP_DIR", str(tmp_path / "envroot"))
    pool = TempDirs()
    ctx = _ctx(pool)
    assert ctx.temp_dir.is_relative_to(tmp_path / "envroot")
    ctx.close()
    pool.close()


def test_a_context_is_the_scope_codecs_decode_a_request_in(tmp_path: Path) -> None:
    """Codecs get the request explicitly: a Context reads a request into its own temp
    dir; the reply scope (clients, tools) reads a reply into a fresh private dir."""
    ctx = _ctx(TempDirs(tmp_path))
    assert ctx.reading_request and ctx.temp_dir.parent.parent == tmp_path
    assert not REPLY.reading_request
    first, second = REPLY.temp_dir, REPLY.temp_dir
    assert first != second and first.is_dir() and not any(first.iterdir())
    assert REPLY.state == {} and REPLY.limits == {}
    first.rmdir()
    second.rmdir()
