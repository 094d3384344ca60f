"""Suite-wide guards: the suite must never pass by collecting nothing."""

from __future__ import annotations

import pytest

MIN_TESTS = 20


def pytest_collection_finish(session: pytest.Session) -> None:
    # A run that selects everything (no -k/-m/paths) must find the whole suite; an empty
    # or gutted collection fails loudly instead of passing green.
    args = session.config.args
    narrowed = session.config.option.keyword or session.config.option.markexpr or any(
        a not in ("tests", "tests/") for a in args)
    if not narrowed and len(session.items) < MIN_TESTS:
        raise pytest.UsageError(
            f"only {len(session.items)} tests collected (expected >= {MIN_TESTS}); "
            "is the suite broken?")
