"""Fixtures shared by the codec tests."""

from __future__ import annotations

import typing as t
from pathlib import Path

import pytest

from tensorwire.context import Context, Headers, RequestInfo
from tensorwire.tempdirs import TempDirs


@pytest.fixture
def ctx(tmp_path: Path) -> t.Iterator[Context]:
    """A request's Context (the scope files and images decode in), its temp dirs under
    the test's own tmp_path."""
    context = Context(RequestInfo("http", "api", Headers()), temp_dirs=TempDirs(tmp_path))
    yield context
    context.close()
