"""The wheel carries every package of the source tree: a subpackage left out of
pyproject.toml's list imports in the editable install and tests, then fails in the
container (`pip install` of the wheel) with a ModuleNotFoundError at start-up."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_of_the_tree_is_in_the_wheel() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {Path(folder): name for name, folder in setuptools["package-dir"].items()}
    found = set()
    for folder, name in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            dotted = ".".join((name, *parts))
            # a folder that is mapped on its own (tensorwire.codecs) is found from it
            if not any((ROOT / other) == init.parent and other != folder for other in folders):
                found.add(dotted)
    assert sorted(found - listed) == [], "add these to [tool.setuptools] packages"
