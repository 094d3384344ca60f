"""tools/extras.py: the extras `make serve` installs for a service, read from its source."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tools.extras import EXTRA_OF, extras

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: What the base install provides, by import name (pyproject's `dependencies`).
BASE = {"pydantic", "annotated_types", "aiohttp", "orjson", "numpy", "google", "grpc",
        "grpc_reflection", "grpc_health", "grpc_status", "prometheus_client"}
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.stem != "__init__")


def test_every_mapped_extra_exists():
    assert set(EXTRA_OF.values()) <= set(PYPROJECT["project"]["optional-dependencies"])


def test_the_quick_start_needs_the_base_install_only():
    assert extras("examples.quickstart:Quickstart", ROOT) == []


def test_imports_of_the_services_own_modules_count_too():
    # examples/train_digits.py imports torch and sklearn itself, and PIL only through
    # examples.digits_model (whose image helpers import it in their functions)
    assert extras("examples.train_digits:X", ROOT) == ["examples", "image", "torch"]


def test_a_file_target_and_an_unknown_module():
    assert extras(str(ROOT / "examples" / "frames.py") + ":Frames") == ["pandas"]
    assert extras("no.such.module:X", ROOT) == []


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_import_of_an_example_is_installed_by_base_or_a_mapped_extra(path):
    """An example importing a package no extra maps would be served without it."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                 and node.module else [])
        for name in names:
            top = name.split(".")[0]
            assert (top in sys.stdlib_module_names or top in BASE or top in EXTRA_OF
                    or top in {"tensorwire", "examples"}), f"{path.name} imports {name}"


def test_the_command_line_prints_them_comma_separated():
    out = subprocess.run([sys.executable, "tools/extras.py", "examples.digits:Digits"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out == "image,torch\n"
