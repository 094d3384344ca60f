"""Which `tensorwire[...]` extras a service needs: `python tools/extras.py MODULE:Class`.

`make serve` installs the base package plus these extras, so that serving the quick
start does not install torch and TensorFlow. They are read from the service's source,
never by importing it (nothing is installed yet when this runs): every `import` in the
module, in functions too, and in the modules it imports from the same folder tree
(`examples.digits` imports `examples.digits_model`), mapped to the extra that provides
it. Prints the extras comma-separated (nothing for the base install). Runs on the
standard library alone.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

#: Top-level import name -> the extra of pyproject.toml that installs it.
EXTRA_OF = {
    "torch": "torch",
    "PIL": "image",
    "pandas": "pandas",
    "tensorflow": "tensorflow",
    "sklearn": "examples",
    "opentelemetry": "otel",
    "watchfiles": "reload",
    "uvloop": "uvloop",
}


def module_file(module: str, root: Path) -> Path | None:
    """The source file of a dotted module name under `root`, if it is there."""
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def extras(target: str, root: Path = Path(".")) -> list[str]:
    """The extras `target` (`MODULE:Class` or `path/to/file.py:Class`) needs, sorted."""
    where = target.split(":", 1)[0]
    if where.endswith(".py"):
        first: Path | None = Path(where)
        root = first.parent
    else:
        first = module_file(where, root)
    if first is None or not first.is_file():
        return []
    needed: set[str] = set()
    seen: set[Path] = set()
    todo = [first]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported(ast.parse(path.read_text(), str(path))):
            top = name.split(".")[0]
            if top in EXTRA_OF:
                needed.add(EXTRA_OF[top])
            elif (local := module_file(name, root)) is not None:
                todo.append(local)  # a module of the service's own tree: read it too
    return sorted(needed)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__.splitlines()[0], file=sys.stderr)
        sys.exit(2)
    print(",".join(extras(sys.argv[1])))
