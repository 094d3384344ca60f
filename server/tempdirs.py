"""Per-request temporary directories, all under one base directory per worker process.

Each request that touches `Context.temp_dir` (an upload saved to disk, a file the method
writes) gets its own subdirectory, created lazily and removed when the request ends,
however it ends. Keeping them under one per-process base makes "nothing leaked" a
checkable property (the base is empty between requests) and lets shutdown remove
whatever a stray thread left behind.

The root is `Settings.extra["temp_dir"]`, else `$TENSORWIRE_TEMP_DIR`, else the system
temp dir. The base directory is named `tensorwire-<pid>-<random>` and is private (0700).
"""

from __future__ import annotations

import itertools
import os
import secrets
import shutil
import tempfile
import threading
from pathlib import Path

ENV_ROOT = "TENSORWIRE_TEMP_DIR"


class TempDirs:
    """A pool of per-request directories under one lazily created, per-process base."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        root = root or os.environ.get(ENV_ROOT) or None
        self.root = Path(root) if root else None
        self._base: Path | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._counter = itertools.count(1)

    @property
    def base(self) -> Path:
        """This process' base directory (a forked worker makes its own)."""
        with self._lock:
            if self._base is None or self._pid != os.getpid() or not self._base.is_dir():
                if self.root is not None:
                    self.root.mkdir(parents=True, exist_ok=True)
                self._pid = os.getpid()
                self._base = Path(tempfile.mkdtemp(prefix=f"tensorwire-{self._pid}-",
                                                   dir=self.root))
            return self._base

    def acquire(self) -> Path:
        """A new, empty, private directory for one request."""
        path = self.base / f"r{next(self._counter)}-{secrets.token_hex(4)}"
        path.mkdir(mode=0o700)
        return path

    def release(self, path: Path) -> None:
        """Remove a request's directory and everything in it."""
        shutil.rmtree(path, ignore_errors=True)

    def in_use(self) -> list[Path]:
        """Request directories that still exist (a test's "nothing leaked" check)."""
        base = self._base
        if base is None or not base.is_dir():
            return []
        return sorted(base.iterdir())

    def close(self) -> None:
        """Remove the base directory (server shutdown)."""
        with self._lock:
            if self._base is not None and self._pid == os.getpid():
                shutil.rmtree(self._base, ignore_errors=True)
            self._base = None


_default: TempDirs | None = None


def default_pool() -> TempDirs:
    """The pool of Contexts created without one (user code, unit tests)."""
    global _default
    if _default is None:
        _default = TempDirs()
    return _default
