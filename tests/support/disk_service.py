"""A service that writes to its request temp dirs: uploads spooled there, and a method
that writes a file of a given size there. Importable by the CLI as
`tests.support.disk_service:Keeper`, so a test can serve it over a small filesystem
(tests/e2e/test_temp_dirs.py fills one)."""

from __future__ import annotations

from pathlib import Path

import tensorwire


@tensorwire.service
class Keeper:
    """Keeps uploads and writes scratch files in the request's temp dir."""

    @tensorwire.api
    def keep(self, upload: Path) -> int:
        """The size of the upload, which the server spooled to the temp dir."""
        return upload.stat().st_size

    @tensorwire.api
    def scratch(self, size: int, *, ctx: tensorwire.Context) -> int:
        """Write `size` bytes to a file in the request's temp dir; its size."""
        out = ctx.temp_dir / "scratch.bin"
        with open(out, "wb") as f:
            for _ in range(size // 4096):
                f.write(b"s" * 4096)
            f.write(b"s" * (size % 4096))
        return out.stat().st_size
