"""The documentation site builds with --strict (broken links and anchors are errors), its
generated reference comes from the code, and its config examples load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensorwire.ops.sources import ConfigError, read_config_file, settings_table
from tests.support.snippets import ROOT, blocks
from tools.docs_hooks import UnknownMarker, cli_help, expand

PAGES = sorted((ROOT / "docs").rglob("*.md"))


def test_the_site_builds_strictly(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    settings = (tmp_path / "reference" / "settings" / "index.html").read_text()
    assert "TENSORWIRE_GRPC_MAX_CONNECTION_AGE" in settings  # generated at build time
    cli = (tmp_path / "reference" / "cli" / "index.html").read_text()
    assert "usage: tensorwire serve [options]" in cli
    assert "generated:" not in cli and "generated:" not in settings


def test_markers_become_the_codes_own_tables():
    assert expand("a\n<!-- generated: settings -->\nb") == f"a\n{settings_table()}\nb"
    serve = expand("<!-- generated: cli serve -->")
    assert serve == f"```text\n{cli_help('serve')}```\n" and "--http-port" in serve
    proto = expand("<!-- generated: proto examples.quickstart:Quickstart -->")
    assert "message SummarizeRequest {" in proto
    quoted = "in a sentence, `<!-- generated: settings -->` stays as it is"
    assert expand(quoted) == quoted
    with pytest.raises(UnknownMarker):
        expand("<!-- generated: setings -->")


def test_every_page_is_in_the_navigation():
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))

    def pages(nav) -> list[str]:
        out = []
        for item in nav:
            for value in item.values() if isinstance(item, dict) else [item]:
                out += pages(value) if isinstance(value, list) else [value]
        return out

    listed = set(pages(config["nav"]))
    assert listed == {str(p.relative_to(ROOT / "docs")) for p in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_config_file_examples_load(page: Path, tmp_path: Path):
    for block in blocks(page):
        if block.lang != "toml":
            continue
        path = tmp_path / "tensorwire.toml"
        path.write_text(block.text)
        try:
            read_config_file(path)
        except ConfigError as exc:
            pytest.fail(f"{block.where}: {exc}")
