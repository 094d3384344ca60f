"""Dependencies point one way: every import of every module, read with `ast`.

The layer order (lowest first; a module may import its own layer or any lower one):

    base      errors, context, tempdirs, settings, validators, naming, version, and the
              fixed protobuf vocabularies (tensorwire.v1, the Open Inference Protocol's)
    wire      tensor bytes, .npy, SSE, gRPC status details (shared with the client)
    codecs    one module per type family; a leaf of the server
    contract  reading a class into the descriptor; decoding
    protobuf  descriptors, message conversion, framing, .proto text
    telemetry logs, metrics
    runtime   the service runtime, admission, deadlines, batching
    compose   services that call services (`tensorwire.depends`): the one server layer
              that uses the client, for dependencies placed elsewhere
    http, grpc, v2      the transports (v2: the Open Inference Protocol on both ports)
    security  auth, CORS, TLS (ops installs them on the transports)
    ops       settings sources, serve, workers, CLI, probe

The client sits beside the server: it may import base and wire, never a server layer;
of the server, only compose imports it.
A module-level cycle is an error even within one layer. Function-level (deferred)
imports are allowed only for heavy frameworks and optional extras, imported the first time
they are used; anything else deferred is an error, so no deferred import can hide a cycle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import ROOT

#: Import-package folders (pyproject's package-dir), as module name prefixes.
FOLDERS = {"tensorwire": ROOT / "server", "tensorwire.codecs": ROOT / "codecs",
           "tensorwire.client": ROOT / "client", "tensorwire.v1": ROOT / "proto/tensorwire/v1",
           "tensorwire.inference": ROOT / "proto/inference"}

LAYERS: list[set[str]] = [
    {"errors", "context", "tempdirs", "settings", "validators", "naming", "version", "v1",
     "inference"},
    {"wire"},
    {"codecs"},
    {"contract"},
    {"protobuf"},
    {"telemetry"},
    {"runtime"},
    {"compose"},
    {"http", "grpc", "v2"},
    {"security"},
    {"ops"},
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
CLIENT_MAY_USE = LAYERS[0] | LAYERS[1]

#: Heavy frameworks, and optional extras that must cost nothing while their feature is
#: off (tracing, reload), which a module may import inside a function, on first use.
DEFERRABLE = {"torch", "tensorflow", "pandas", "PIL", "ml_dtypes", "numpy",
              "opentelemetry", "watchfiles", "uvloop"}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    deferred: bool


def modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            owner = max((p for p, f in FOLDERS.items() if path.is_relative_to(f)),
                        key=lambda p: len(str(FOLDERS[p])))
            if owner != package:
                continue
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def _type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str, path: Path, known: set[str]) -> list[Edge]:
    """Every `tensorwire` module imported by `name` (relative ones resolved), and every
    deferred third-party import; `if TYPE_CHECKING:` blocks are not imports."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    edges: list[Edge] = []

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                continue
            inner = deferred or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    edges.append(Edge(name, alias.name, child.lineno, deferred))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".")
                    if not is_package:
                        base = base[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                for alias in child.names:
                    sub = f"{module}.{alias.name}"
                    target = sub if sub in known else module
                    edges.append(Edge(name, target, child.lineno, deferred))
            visit(child, inner)

    visit(tree, False)
    return edges


def layer_of(module: str) -> str | None:
    """The layer name of a tensorwire module ("client" for the client)."""
    parts = module.split(".")
    if parts[0] != "tensorwire":
        return None
    if len(parts) == 1 or parts[1] == "__main__":
        return "facade"  # the package's public names, and `python -m tensorwire`
    return parts[1]


def violations(graph: dict[str, list[Edge]]) -> list[str]:
    found: list[str] = []
    for source, edges in graph.items():
        src_layer = layer_of(source)
        for edge in edges:
            top = edge.target.split(".")[0]
            dst_layer = layer_of(edge.target)
            where = f"{source}:{edge.line} imports {edge.target}"
            lazy_name = src_layer == "facade" and edge.target == "importlib"
            if edge.deferred and (dst_layer is not None or top not in DEFERRABLE) \
                    and not lazy_name:
                found.append(f"{where} inside a function (only heavy frameworks may wait)")
            if dst_layer is None or src_layer == "facade":
                continue
            if dst_layer == "facade":
                found.append(f"{where}: the package facade is for users, not for modules")
            elif src_layer == "client":
                if dst_layer != "client" and dst_layer not in CLIENT_MAY_USE:
                    found.append(f"{where}: the client may use only base and wire modules")
            elif dst_layer == "client":
                if src_layer != "compose":
                    found.append(f"{where}: the server never imports the client (but "
                                 "compose, for dependencies placed elsewhere)")
            elif RANK[dst_layer] > RANK[src_layer]:
                found.append(f"{where}: {src_layer} is below {dst_layer}")
    return found


def cycles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """Module-level import cycles (Tarjan's strongly connected components)."""
    adjacent = {m: sorted({e.target for e in edges if e.target in graph and not e.deferred})
                for m, edges in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in adjacent[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in adjacent[v]:
                out.append(sorted(component))

    for v in sorted(adjacent):
        if v not in index:
            strongconnect(v)
    return out


def graph_of(sources: dict[str, Path]) -> dict[str, list[Edge]]:
    known = set(sources)
    # A package's __init__ importing its own submodules is how a package exposes them,
    # not a dependency of those modules on the package: only the edge into the package
    # from outside counts.
    return {name: imports(name, path, known) for name, path in sources.items()}


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Edge]]:
    return graph_of(modules())


def test_every_module_is_in_a_layer(graph: dict[str, list[Edge]]) -> None:
    unplaced = sorted(m for m in graph if layer_of(m) not in {*RANK, "client", "facade"})
    assert unplaced == [], f"modules in no layer: {unplaced}"
    assert len(graph) > 80  # the walk found the tree, not an empty folder


def test_dependencies_point_one_way(graph: dict[str, list[Edge]]) -> None:
    assert violations(graph) == []


def test_no_import_cycles(graph: dict[str, list[Edge]]) -> None:
    assert cycles(graph) == []


def test_the_checks_catch_a_back_edge_a_cycle_and_a_deferred_import(tmp_path: Path) -> None:
    """The same walk over a tiny tree with each kind of mistake in it."""
    (tmp_path / "codecs").mkdir()
    (tmp_path / "runtime").mkdir()
    (tmp_path / "codecs" / "a.py").write_text(
        "from ..runtime import b\n"
        "def f():\n    from . import c\n")
    (tmp_path / "codecs" / "c.py").write_text("from . import d\n")
    (tmp_path / "codecs" / "d.py").write_text("from . import c\n")
    (tmp_path / "runtime" / "b.py").write_text("import torch\ndef g():\n    import torch\n")
    sources = {
        "tensorwire.codecs.a": tmp_path / "codecs" / "a.py",
        "tensorwire.codecs.c": tmp_path / "codecs" / "c.py",
        "tensorwire.codecs.d": tmp_path / "codecs" / "d.py",
        "tensorwire.runtime.b": tmp_path / "runtime" / "b.py",
    }
    graph = graph_of(sources)
    found = violations(graph)
    assert any("codecs.a:1 imports tensorwire.runtime.b: codecs is below runtime" in v
               for v in found), found
    assert any("codecs.a:3 imports tensorwire.codecs.c inside a function" in v
               for v in found), found
    assert not any("runtime.b" in v and "torch" in v for v in found), found
    assert cycles(graph) == [["tensorwire.codecs.c", "tensorwire.codecs.d"]]
