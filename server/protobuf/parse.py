"""`.proto` source text -> the facts a contract lock and a contract check read.

A published contract is a `.proto` file (what `tensorwire proto` printed, perhaps years
ago), and the server must read it back at start-up without protoc or buf: those are
development tools, not dependencies of a running server. This is a small recursive
descent parser of proto2/proto3 source. It keeps what numbering needs (messages, their
fields and `reserved` statements, enums and their values, services and their rpcs) and
skips what it does not (options, extensions, imports), so a hand-edited file with
comments, options or nested types still reads. It is not a validator: protoc and
`buf` judge whether the file compiles.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Highest protobuf field number (`reserved 10 to max;`).
MAX_FIELD = 536_870_911
#: Highest enum value number (`reserved 10 to max;` in an enum).
MAX_ENUM = 2_147_483_647

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*.*?\*/)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?))
  | (?P<ident>\.?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
  | (?P<sym>[{}\[\]()<>;=,:.+-])
""", re.VERBOSE | re.DOTALL)


class ProtoSyntaxError(ValueError):
    """The text is not a .proto this parser can read; the message names the line."""


@dataclass
class Field:
    name: str
    number: int
    #: The type as written (`int64`, `Review`, `map<string, int64>`).
    type: str
    #: "optional", "repeated", "required" or "" (proto3 singular without presence).
    label: str = ""
    oneof: str | None = None


@dataclass
class Reserved:
    """`reserved` statements: number ranges (inclusive) and names."""

    ranges: list[tuple[int, int]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def numbers_contain(self, number: int) -> bool:
        return any(lo <= number <= hi for lo, hi in self.ranges)


@dataclass
class Message:
    name: str  # dotted within the file: `Outer.Inner`
    fields: list[Field] = field(default_factory=list)
    reserved: Reserved = field(default_factory=Reserved)


@dataclass
class Enum:
    name: str
    values: dict[str, int] = field(default_factory=dict)
    reserved: Reserved = field(default_factory=Reserved)


@dataclass
class Rpc:
    name: str
    input_type: str
    output_type: str
    client_streaming: bool = False
    server_streaming: bool = False


@dataclass
class Service:
    name: str
    rpcs: dict[str, Rpc] = field(default_factory=dict)


@dataclass
class ProtoFile:
    """What one .proto file declares (messages and enums flattened by dotted name)."""

    package: str = ""
    messages: dict[str, Message] = field(default_factory=dict)
    enums: dict[str, Enum] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ProtoSyntaxError(f"line {line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind not in ("ws", "line", "block"):
            out.append((m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.file = ProtoFile()

    # -- token helpers
    def peek(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.toks[j][0] if j < len(self.toks) else ""

    def line(self) -> int:
        return self.toks[min(self.i, len(self.toks) - 1)][1] if self.toks else 1

    def next(self) -> str:
        if self.i >= len(self.toks):
            raise ProtoSyntaxError("unexpected end of file")
        tok = self.toks[self.i][0]
        self.i += 1
        return tok

    def expect(self, want: str) -> None:
        line, got = self.line(), self.next()
        if got != want:
            raise ProtoSyntaxError(f"line {line}: expected {want!r}, got {got!r}")

    def ident(self) -> str:
        line, tok = self.line(), self.next()
        if not re.fullmatch(r"\.?[A-Za-z_][\w.]*", tok):
            raise ProtoSyntaxError(f"line {line}: expected a name, got {tok!r}")
        return tok

    def integer(self) -> int:
        line, tok = self.line(), self.next()
        if tok == "-":  # `- 1` written apart
            tok = "-" + self.next()
        try:
            return int(tok, 0) if not re.fullmatch(r"-?0\d+", tok) else int(tok, 8)
        except ValueError:
            raise ProtoSyntaxError(f"line {line}: expected an integer, got {tok!r}") from None

    def skip_statement(self) -> None:
        """Skip to the end of a statement (`;`), over any nested braces or brackets."""
        depth = 0
        while True:
            tok = self.next()
            if tok in ("{", "[", "("):
                depth += 1
            elif tok in ("}", "]", ")"):
                depth -= 1
                if depth == 0 and tok == "}" and self.peek() != ";":
                    return  # a block statement (`extend X { ... }`) ends at its brace
            elif tok == ";" and depth == 0:
                return

    def skip_brackets(self) -> None:
        """Skip `[ ... ]` field options."""
        self.expect("[")
        depth = 1
        while depth:
            tok = self.next()
            depth += {"[": 1, "]": -1}.get(tok, 0)

    # -- file
    def parse(self) -> ProtoFile:
        while self.i < len(self.toks):
            tok = self.peek()
            if tok == "package":
                self.next()
                self.file.package = self.ident()
                self.expect(";")
            elif tok == "message":
                self.message("")
            elif tok == "enum":
                self.enum("")
            elif tok == "service":
                self.service()
            elif tok == ";":
                self.next()
            else:  # syntax, edition, import, option, extend
                self.skip_statement()
        return self.file

    def message(self, scope: str) -> None:
        self.expect("message")
        name = scope + self.ident()
        msg = self.file.messages.setdefault(name, Message(name))
        self.expect("{")
        self.message_body(msg, oneof=None)

    def message_body(self, msg: Message, oneof: str | None) -> None:
        while True:
            tok = self.peek()
            if tok == "}":
                self.next()
                return
            if tok == "message":
                self.message(msg.name + ".")
            elif tok == "enum":
                self.enum(msg.name + ".")
            elif tok == "oneof":
                self.next()
                name = self.ident()
                self.expect("{")
                self.message_body(msg, oneof=name)
            elif tok == "reserved":
                self.reserved(msg.reserved, MAX_FIELD)
            elif tok in ("option", "extensions", "extend"):
                self.skip_statement()
            elif tok == ";":
                self.next()
            else:
                self.field(msg, oneof)

    def field(self, msg: Message, oneof: str | None) -> None:
        label = ""
        if self.peek() in ("optional", "repeated", "required"):
            label = self.next()
        if self.peek() == "map" and self.peek(1) == "<":
            self.next()
            self.expect("<")
            key = self.ident()
            self.expect(",")
            value = self.ident()
            self.expect(">")
            ftype = f"map<{key}, {value}>"
        else:
            ftype = self.ident()
            if ftype == "group":
                raise ProtoSyntaxError(f"line {self.line()}: proto2 groups are not supported")
        name = self.ident()
        self.expect("=")
        number = self.integer()
        if self.peek() == "[":
            self.skip_brackets()
        self.expect(";")
        msg.fields.append(Field(name, number, ftype, label, oneof))

    def reserved(self, into: Reserved, top: int) -> None:
        self.expect("reserved")
        while True:
            tok = self.peek()
            if tok[:1] in ("'", '"'):
                into.names.append(self.next()[1:-1])
            elif tok[:1].isalpha() or tok[:1] == "_":  # editions: `reserved foo;`
                into.names.append(self.next())
            else:
                lo = self.integer()
                hi = lo
                if self.peek() == "to":
                    self.next()
                    if self.peek() == "max":
                        self.next()
                        hi = top
                    else:
                        hi = self.integer()
                into.ranges.append((lo, hi))
            if self.peek() == ",":
                self.next()
                continue
            self.expect(";")
            return

    def enum(self, scope: str) -> None:
        self.expect("enum")
        name = scope + self.ident()
        enum = self.file.enums.setdefault(name, Enum(name))
        self.expect("{")
        while True:
            tok = self.peek()
            if tok == "}":
                self.next()
                return
            if tok == "reserved":
                self.reserved(enum.reserved, MAX_ENUM)
            elif tok == "option":
                self.skip_statement()
            elif tok == ";":
                self.next()
            else:
                value = self.ident()
                self.expect("=")
                enum.values[value] = self.integer()
                if self.peek() == "[":
                    self.skip_brackets()
                self.expect(";")

    def service(self) -> None:
        self.expect("service")
        name = self.ident()
        svc = self.file.services.setdefault(name, Service(name))
        self.expect("{")
        while True:
            tok = self.peek()
            if tok == "}":
                self.next()
                return
            if tok == "rpc":
                self.rpc(svc)
            elif tok == ";":
                self.next()
            else:  # option
                self.skip_statement()

    def rpc(self, svc: Service) -> None:
        self.expect("rpc")
        name = self.ident()

        def endpoint() -> tuple[bool, str]:
            self.expect("(")
            stream = self.peek() == "stream" and self.peek(1) != ")"
            if stream:
                self.next()
            type_name = self.ident()
            self.expect(")")
            return stream, type_name

        cs, in_type = endpoint()
        self.expect("returns")
        ss, out_type = endpoint()
        if self.peek() == "{":
            self.next()
            depth = 1
            while depth:
                tok = self.next()
                depth += {"{": 1, "}": -1}.get(tok, 0)
            if self.peek() == ";":
                self.next()
        else:
            self.expect(";")
        svc.rpcs[name] = Rpc(name, in_type, out_type, cs, ss)


def parse_proto(text: str) -> ProtoFile:
    """The messages, enums and services of .proto source (raises ProtoSyntaxError)."""
    return _Parser(text).parse()
