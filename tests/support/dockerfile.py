"""Just enough of a Dockerfile parser to run what the image runs, without Docker.

Instructions are joined across `\\` continuations, grouped by stage; ARG defaults are
substituted into ENV values the way `docker build` does (`${VAR}` / `$VAR`).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)

    def all(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]

    def one(self, keyword: str) -> str:
        (rest,) = self.all(keyword)
        return rest

    def env(self) -> dict[str, str]:
        """ENV assignments with ARG defaults (and earlier ENV values) substituted."""
        out: dict[str, str] = {}
        for rest in self.all("ENV"):
            for item in shlex.split(rest):
                key, _, value = item.partition("=")
                out[key] = _VAR.sub(lambda m: {**self.args, **out}.get(
                    m.group(1) or m.group(2), m.group(0)), value)
        return out

    def exec_form(self, keyword: str) -> list[str]:
        """ENTRYPOINT/CMD (or HEALTHCHECK's CMD) in JSON exec form."""
        rest = self.one(keyword)
        if keyword == "HEALTHCHECK":
            rest = rest[rest.index("CMD") + 3:]
        return json.loads(rest)

    def copies(self) -> list[tuple[list[str], str]]:
        out = []
        for rest in self.all("COPY"):
            words = [w for w in shlex.split(rest) if not w.startswith("--")]
            out.append((words[:-1], words[-1]))
        return out


def parse(path: Path) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages in order)."""
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "FROM":
            words = rest.split()
            base = _VAR.sub(lambda m: global_args.get(m.group(1) or m.group(2), ""), words[0])
            name = words[2] if len(words) > 2 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
            continue
        if keyword == "ARG":
            key, _, value = rest.partition("=")
            value = value.strip('"')
            (stages[-1].args if stages else global_args)[key] = value
        if stages:
            stages[-1].instructions.append((keyword, rest))
    return global_args, stages
