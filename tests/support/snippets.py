"""Code blocks of the README, the docs and the examples' docstrings, run as written.

A Markdown block is tested when it is Python or holds a `curl`/`grpcurl` line. The line
before it names what it runs against, in an HTML comment (invisible on GitHub and in
the docs site):

    <!-- snippet: examples.quickstart:Quickstart -->        a served example
    <!-- snippet: examples.digits:Digits max_concurrency=4 -->  with settings
    <!-- snippet: iris=examples.iris:Iris examples.quickstart:Quickstart -->  several
    <!-- snippet: run -->                                    Python that needs no server
    <!-- snippet: skip: why -->                              not run here, and why

Shell blocks run line by line in one bash session, as a reader pastes them: the test's
server stands in for `make serve` / `tensorwire serve` (lines that start servers, and
`kill`, are not run), ports 3000/3001 and 50051/50052 become the server's, `/tmp/`
becomes a private folder and `.venv/bin/` the running interpreter's. Run are `curl`,
`grpcurl`, `cd`, `mkdir`, `echo`, `printf` and the project's own commands (`.venv/bin/python -m
examples...` or `-c ...`, `.venv/bin/tensorwire proto|openapi`). Each command must succeed (a curl:
HTTP status below 400) unless its trailing comment starts with the status it answers
(`# 400 naming max_words`) or, for grpcurl, the gRPC code (`# InvalidArgument ...`).
Comment lines right after a command that start like output (`{`, `[`, `"`, a digit,
`...`) are its expected output: the whole output, compared without whitespace, `...`
standing for anything.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<lang>[\w+-]*)[^\n]*$")
_MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<what>.*?)\s*-->\s*$")
SHELL = {"sh", "bash", "shell", "console"}
HTTP_PORTS = {"3000": "http", "3001": "http", "50051": "grpc", "50052": "grpc"}
GRPC_CODES = ("Cancelled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
              "AlreadyExists", "PermissionDenied", "ResourceExhausted",
              "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "Internal",
              "Unavailable", "DataLoss", "Unauthenticated")
#: Commands a reader runs that the test does not: the server is the test's own.
_NOT_RUN = re.compile(r"^(make\b|kill\b|tensorwire serve\b|\S*/tensorwire serve\b|"
                      r"(xdg-)?open\b|docker\b|podman\b|kubectl\b|pip\b|git\b|"
                      r"python3(\.11)? -m venv\b)")
_RUN = re.compile(r"^(curl|grpcurl|cd|mkdir|echo|printf)\b|^\S*/bin/python (-m examples\.|-c )|"
                  r"^\S*/bin/tensorwire (proto|openapi)\b")


@dataclasses.dataclass
class Block:
    """One fenced code block and what its marker says to run it against."""

    source: Path
    line: int
    lang: str
    text: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        """Whether the block must be tested: Python, or a curl/grpcurl line."""
        if self.lang in ("python", "py"):
            return True
        return self.lang in SHELL and any(
            re.match(r"\s*(\$ )?(curl|grpcurl)\b", line) for line in self.text.splitlines())

    @property
    def target(self) -> str | None:
        """`MODULE:Class` of the example the block runs against (None: no server)."""
        if self.marker is None or self.marker == "run" or self.marker.startswith("skip"):
            return None
        return self.targets[0][1]

    @property
    def targets(self) -> list[tuple[str, str]]:
        """(prefix, `MODULE:Class`) of every service the block's server serves: the
        marker's words with a colon, `prefix=MODULE:Class` under a prefix (several make
        one server of several services, as `tensorwire serve a:A b:B` does)."""
        words = [w for w in (self.marker or "").split() if ":" in w]
        return [(head, rest) if rest else ("", head)
                for head, _, rest in (w.partition("=") if "=" in w else (w, "", "")
                                      for w in words)]

    @property
    def settings(self) -> dict[str, object]:
        """`key=value` settings after the target(s), typed as the literal reads."""
        out: dict[str, object] = {}
        for pair in (self.marker or "").split()[1:]:
            if ":" in pair:
                continue  # another service
            key, _, value = pair.partition("=")
            out[key] = (True if value == "true" else False if value == "false"
                        else int(value) if value.isdigit() else value)
        return out


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, each with the marker before it."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m["indent"], m["fence"], m["lang"].lower()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                         for line in lines[i + 1:j])
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = _MARKER.match(lines[k]) if k >= 0 else None
        out.append(Block(path, i + 1, lang, body + "\n",
                         marker["what"] if marker else None))
        i = j + 1
    return out


def docstring_block(module: object, path: Path) -> Block | None:
    """The indented shell lines of an example's docstring (its `curl` quick tour), as a
    block run against the example's first service."""
    doc = getattr(module, "__doc__", None) or ""
    lines = [line[4:] for line in doc.splitlines() if line.startswith("    ")]
    text = "\n".join(lines)
    block = Block(path, 1, "sh", text + "\n", None)
    return block if block.runnable else None


# ------------------------------------------------------------------------ running
@dataclasses.dataclass
class Command:
    text: str
    line: int
    expected_output: list[str]
    #: HTTP status (curl) or gRPC code name (grpcurl) the command answers; None: success
    expected_failure: str | None


def commands(text: str) -> list[Command]:
    """A shell block's commands: continuation lines joined, comments attached.

    A comment line right after a command (or after its output lines) that starts like
    output does (`{`, `[`, `"`, a digit, `...`) is that command's expected output; other
    comment lines are notes.
    """
    out: list[Command] = []
    lines = text.splitlines()
    i, attach = 0, False
    while i < len(lines):
        raw = lines[i].strip()
        start = i + 1
        i += 1
        if not raw:
            attach = False
            continue
        if raw.startswith("#"):
            note = raw[1:].strip()
            if attach and re.match(r'[{\["\d]|\.\.\.', note):
                out[-1].expected_output.append(note)
            else:
                attach = False
            continue
        while raw.endswith("\\") and i < len(lines):
            raw = raw[:-1].rstrip() + " " + lines[i].strip()
            i += 1
        command, comment = _split_comment(raw.removeprefix("$ "))
        words = comment.split()
        first = words[0].rstrip(":,") if words else ""
        failure = first if re.fullmatch(r"[45]\d\d", first) or first in GRPC_CODES else None
        out.append(Command(command, start, [], failure))
        attach = True
    return out


def _split_comment(line: str) -> tuple[str, str]:
    """(command, trailing comment): a `#` outside quotes that follows whitespace."""
    quote = None
    for n, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and n and line[n - 1].isspace():
            return line[:n].rstrip(), line[n + 1:].strip()
    return line, ""


def rewrite(text: str, ports: dict[str, int], scratch: Path) -> str:
    """A snippet as it runs here: the server's ports, a private /tmp, this venv."""
    def port(m: re.Match[str]) -> str:
        kind = HTTP_PORTS.get(m["port"])
        return f"{m['host']}:{ports[kind]}" if kind in ports else m[0]

    text = re.sub(r"(?P<host>localhost|127\.0\.0\.1):(?P<port>\d+)", port, text)
    text = re.sub(r"(?<![\w.])/tmp/", f"{scratch}/", text)
    return re.sub(r"(?<![\w/])\.venv/bin/", f"{BIN}/", text)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORWIRE_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    return env


def _matches(expected: list[str], output: str) -> bool:
    """Whether `output` is the expected lines, whitespace aside, `...` matching anything."""
    pieces = "".join("".join(expected).split()).split("...")
    pattern = ".*".join(re.escape(piece) for piece in pieces)
    return re.fullmatch(pattern, "".join(output.split()), re.DOTALL) is not None


def run_shell(block: Block, ports: dict[str, int], scratch: Path) -> list[str]:
    """Run a shell block; the problems found, one line each (empty: it works)."""
    cwd = scratch / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    # curl writes its status last, on a line of its own, so that it can be checked
    prologue = ('curl() { command curl -sS -w "\\n@@status %{http_code}\\n" "$@"; }\n'
                f"cd {shlex.quote(str(cwd))}\n")
    script = [prologue]
    checks: list[tuple[int, Command]] = []
    for n, cmd in enumerate(commands(block.text)):
        text = rewrite(cmd.text, ports, scratch)
        if _NOT_RUN.match(cmd.text) or not _RUN.match(text.split("&&")[0].strip()):
            continue
        out = scratch / f".out{n}"
        script.append(f"{{ {text} ; }} > {shlex.quote(str(out))} 2>&1; "
                      f"echo $? > {shlex.quote(str(out))}.rc\n")
        checks.append((n, cmd))
    done = subprocess.run(["bash", "-c", "".join(script)], env=_env(), capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        problems.append(f"{block.where}: the block's shell failed: {done.stderr.strip()}")
    for n, cmd in checks:
        out = scratch / f".out{n}"
        where = f"{block.where} (+{cmd.line - 1}) `{cmd.text[:70]}`"
        if not out.exists():
            problems.append(f"{where}: did not run")
            continue
        output = out.read_text(errors="replace")
        rc = int((scratch / f".out{n}.rc").read_text().strip() or 1)
        statuses = re.findall(r"^@@status (\d+)$", output, re.M)
        body = re.sub(r"\n?@@status \d+\n?", "\n", output).strip()
        expect = cmd.expected_failure
        if statuses:  # curl
            status = statuses[-1]
            if expect is not None and status != expect:
                problems.append(f"{where}: answered {status}, the docs say {expect}: {body}")
            elif expect is None and (rc != 0 or int(status) >= 400):
                problems.append(f"{where}: exit {rc}, HTTP {status}: {body[:400]}")
        elif expect is not None:
            if rc == 0 or f"Code: {expect}" not in body:
                problems.append(f"{where}: expected gRPC {expect}, got exit {rc}: {body[:400]}")
        elif rc != 0:
            problems.append(f"{where}: exit {rc}: {body[:400]}")
        if cmd.expected_output and not _matches(cmd.expected_output, body):
            problems.append(f"{where}: output differs from the docs\n  docs:   "
                            f"{' '.join(cmd.expected_output)}\n  actual: {body[:600]}")
    return problems


def run_python(block: Block, ports: dict[str, int], scratch: Path) -> list[str]:
    """Run a Python block as a script of its own; its problems (empty: it works)."""
    cwd = scratch / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    code = rewrite(block.text, ports, scratch)
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return [f"{block.where}: exit {done.returncode}:\n{done.stderr[-2000:]}"]
    return []
