"""A stand-in for the HTTP transport's Part, for codec unit tests."""

from __future__ import annotations

from pathlib import Path


class FakePart:
    """What the HTTP transport hands a codec: a name, labels and the bytes (whole:
    `bound` None, so codecs read it with `read`)."""

    length: int | None = None
    bound: int | None = None

    def __init__(self, data: bytes, media_type: str | None = None,
                 filename: str | None = None, name: str = "file") -> None:
        self.name = name
        self.filename = filename
        self.media_type = media_type
        self.consumed = 0
        self._data = data

    async def read(self) -> bytes:
        self.consumed = len(self._data)
        return self._data

    async def save(self, path: Path) -> int:
        Path(path).write_bytes(self._data)
        self.consumed = len(self._data)
        return self.consumed
