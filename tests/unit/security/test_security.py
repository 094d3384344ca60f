"""Bearer-token checks, log formatting and the no-pickle rule."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import orjson
import pytest

from tensorwire.security.bearer import BearerAuth
from tensorwire.telemetry.logs import JsonFormatter

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("header", "ok"), [
    ("Bearer s3cret", True),
    ("bearer s3cret", True),
    ("Bearer  s3cret ", True),
    ("Bearer s3cre", False),
    ("Bearer s3cret2", False),
    ("Basic s3cret", False),
    ("s3cret", False),
    ("Bearer", False),
    ("", False),
    (None, False),
    ("Bearer sécret", False),
])
def test_bearer_auth(header, ok):
    assert BearerAuth("s3cret").allows(header) is ok


def test_auth_repr_and_refusal_never_hold_the_token():
    auth = BearerAuth("s3cret")
    assert "s3cret" not in repr(auth)
    err = auth.refusal()
    assert "s3cret" not in err.message and err.status_code == 401
    assert err.grpc_code == "UNAUTHENTICATED" and "Bearer" in err.headers["WWW-Authenticate"]


def test_json_log_lines():
    record = logging.LogRecord("tensorwire.access", logging.INFO, __file__, 1,
                               "http %s %s", ("x", 200), None)
    record.fields = {"api": "x", "status": "200", "duration_ms": 1.5}
    line = orjson.loads(JsonFormatter().format(record))
    assert line["msg"] == "http x 200" and line["api"] == "x" and line["duration_ms"] == 1.5
    assert line["level"] == "info" and line["logger"] == "tensorwire.access"
    assert line["ts"].endswith("Z")


def test_no_pickle_anywhere():
    """Nothing in the package can unpickle (wire data or otherwise)."""
    bad = re.compile(r"^\s*(import|from)\s+(c?pickle|dill|cloudpickle|marshal|"
                     r"multiprocessing)\b|allow_pickle\s*=\s*True", re.MULTILINE)
    offenders = [str(p.relative_to(ROOT)) for folder in ("server", "codecs")
                 for p in (ROOT / folder).rglob("*.py") if bad.search(p.read_text())]
    assert offenders == []
