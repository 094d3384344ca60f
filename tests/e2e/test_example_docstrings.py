"""Each example's docstring opens with the curl lines that try it: they run as written
against the example, with the sample files its own scripts write."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import tensorwire
from tests.support.servers import serving
from tests.support.snippets import ROOT, docstring_block, run_shell

#: Examples whose docstring curls send files the reader has and the project does not.
BRING_YOUR_OWN = {"audio": "an MP3 of your own (speech.mp3), your notes.txt, any file"}
MODULES = sorted(p.stem for p in (ROOT / "examples").glob("*.py")
                 if p.stem not in {"__init__", "digits_model", "train_digits"})
#: Examples whose curls call another than their first service (a port that keeps the
#: order of the code it ports: the dependency first).
SERVED = {"bentoml_distributed": "IrisClassifier"}


def first_service(module: object) -> type:
    for obj in vars(module).values():
        if isinstance(obj, type) and obj.__module__ == module.__name__:  # type: ignore[attr-defined]
            try:
                tensorwire.get_service_spec(obj)
            except (TypeError, ValueError, KeyError):
                continue
            return obj
    raise AssertionError(f"{module} defines no service")


@pytest.mark.parametrize("name", MODULES)
def test_the_docstring_curls_answer(name: str, tmp_path: Path):
    if name in BRING_YOUR_OWN:
        pytest.skip(f"examples/{name}.py's curls send {BRING_YOUR_OWN[name]}")
    try:
        module = importlib.import_module(f"examples.{name}")
    except ModuleNotFoundError as exc:  # a framework this install lacks (make test has all)
        pytest.skip(f"examples/{name}.py needs {exc.name}")
    block = docstring_block(module, ROOT / "examples" / f"{name}.py")
    if block is None:
        pytest.skip(f"examples/{name}.py's docstring has no curl line")
    service = getattr(module, SERVED[name]) if name in SERVED else first_service(module)
    with serving(service) as server:
        ports = {"http": server.http_port, "grpc": server.grpc_port}
        problems = run_shell(block, ports, tmp_path)
    assert not problems, "\n".join(problems)
