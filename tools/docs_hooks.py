"""MkDocs hook (mkdocs.yml `hooks:`): reference tables generated from the code at build time.

A page holds a marker where a generated part goes, and the build replaces it, so the
published reference cannot drift from the code:

    <!-- generated: settings -->        every setting: flag, env var, TOML key, default
    <!-- generated: cli COMMAND -->     `tensorwire COMMAND --help` (COMMAND: serve, proto,
                                        openapi; `tensorwire` alone: the top level)
    <!-- generated: proto MODULE:Class -->  the service's .proto, as `tensorwire proto`
                                        prints it

The settings come from `tensorwire.ops.sources` (which reads `Settings`' fields), the
help text from the CLI's own argparse parsers, the .proto from the service's contract.
"""

from __future__ import annotations

import os
import re
from typing import Any

#: A marker is a line of its own (one quoted in a sentence or in code stays as it is).
MARKER = re.compile(r"^[ \t]*<!--\s*generated:\s*(?P<what>[\w-]+)(?:\s+(?P<arg>\S+))?\s*-->"
                    r"[ \t]*$", re.MULTILINE)
#: The width argparse wraps help at (it reads COLUMNS): the same on every machine.
HELP_WIDTH = "100"


class UnknownMarker(ValueError):
    """A page asks for a part no generator makes (a typo must not build silently)."""


def cli_help(command: str | None) -> str:
    """`tensorwire [COMMAND] --help` as the CLI prints it."""
    from tensorwire.ops.cli import _build

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        parser, commands = _build()
        target = parser if command in (None, "tensorwire") else commands.get(command)
        if target is None:
            raise UnknownMarker(f"no tensorwire command {command!r} (known: "
                                f"{', '.join(commands)})")
        return target.format_help()
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def generated(what: str, arg: str | None) -> str:
    """The Markdown a marker stands for."""
    if what == "settings":
        from tensorwire.ops.sources import settings_table

        return settings_table()
    if what == "cli":
        return "```text\n" + cli_help(arg) + "```\n"
    if what == "proto" and arg:
        from tensorwire.ops.loader import load_service
        from tensorwire.protobuf.descriptors import ServiceProto

        return "```proto\n" + ServiceProto(load_service(arg)).proto_text() + "```\n"
    raise UnknownMarker(f"unknown generated part {what!r} (known: settings, cli, proto)")


def expand(markdown: str) -> str:
    """`markdown` with every marker replaced by its generated part."""
    return MARKER.sub(lambda m: generated(m["what"], m["arg"]), markdown)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return expand(markdown)
