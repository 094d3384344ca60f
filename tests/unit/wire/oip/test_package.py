"""`tensorwire.wire.oip` as a package: pure wire helpers, usable by any transport."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tensorwire.wire import oip


def test_the_package_imports_only_numpy_orjson_the_stdlib_errors_and_itself():
    """Every module of the package: a pure wire helper, usable by any transport."""
    folder = Path(oip.__file__).parent
    siblings = {"." + p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {".datatypes", ".raw", ".typed", ".infer_messages", ".binary"} <= siblings
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        top: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                top |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                top.add("." * node.level + module if node.level else module.split(".")[0])
        allowed = {"numpy", "orjson", "...errors", "__future__", *siblings}
        assert {m for m in top if m not in sys.stdlib_module_names} <= allowed, path.name
        lazy = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for a in node.names} - top
        assert lazy <= {"ml_dtypes"}, path.name
        assert len(path.read_text().splitlines()) <= 400, f"{path.name} is over 400 lines"
