"""A directory that outlives one test run when pytest's cache is on (npm packages, a
throwaway venv), and a fresh temporary one when it is off (`-p no:cacheprovider`)."""

from __future__ import annotations

from pathlib import Path

import pytest


def kept_dir(request: pytest.FixtureRequest, name: str) -> Path:
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir(name))
    return request.getfixturevalue("tmp_path_factory").mktemp(name)
