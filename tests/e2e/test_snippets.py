"""Every Python block, and every shell block with a curl or grpcurl line, of the README
and of docs/ runs against the example it names (tests/support/snippets.py), so a snippet
that stops working fails `make test`."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tensorwire.runtime.hosted import Placement
from tests.support.servers import RunningServer, serving
from tests.support.snippets import ROOT, Block, blocks, run_python, run_shell

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
ALL = [b for page in PAGES for b in blocks(page)]
RUNNABLE = [b for b in ALL if b.runnable]
TESTED = [b for b in RUNNABLE if b.marker is not None and not b.marker.startswith("skip")]


def test_the_pages_have_snippets_to_run():
    assert len(TESTED) >= 25, len(TESTED)
    assert any(b.source.name == "README.md" for b in TESTED)


def test_every_python_and_curl_block_says_what_it_runs_against():
    unmarked = [b.where for b in RUNNABLE if b.marker is None]
    assert not unmarked, ("blocks without a `<!-- snippet: ... -->` line before them: "
                          + ", ".join(unmarked))
    for block in RUNNABLE:
        if block.marker and block.marker.startswith("skip"):
            assert block.marker.startswith("skip: ") and len(block.marker) > 10, (
                f"{block.where}: a skipped block says why")


@pytest.fixture(scope="module")
def servers() -> Iterator[Callable[[Block], RunningServer]]:
    """One server per (example, settings), started when a block first needs it."""
    with contextlib.ExitStack() as stack:
        cache: dict[str, RunningServer] = {}

        def server_for(block: Block) -> RunningServer:
            key = block.marker or ""
            if key not in cache:
                placed = []
                for prefix, target in block.targets:
                    module, _, name = target.partition(":")
                    placed.append((getattr(importlib.import_module(module), name),
                                   Placement(prefix=prefix, target=target)))
                served = placed[0][0] if len(placed) == 1 and not placed[0][1].prefix \
                    else placed
                cache[key] = stack.enter_context(serving(served, **block.settings))
            return cache[key]

        yield server_for


@pytest.mark.parametrize("block", TESTED, ids=[b.where for b in TESTED])
def test_the_snippet_runs(block: Block, servers, tmp_path: Path):
    ports: dict[str, int] = {}
    if block.target is not None:
        try:
            server = servers(block)
        except ModuleNotFoundError as exc:  # a framework this install lacks
            pytest.skip(f"{block.target} needs {exc.name}")
        ports = {"http": server.http_port, "grpc": server.grpc_port}
    run = run_python if block.lang in ("python", "py") else run_shell
    problems = run(block, ports, tmp_path)
    assert not problems, "\n".join(problems)
