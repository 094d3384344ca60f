"""`tensorwire proto --out / --against / --check`: publish a contract, keep it, check it.

A published contract is a folder tree, committed next to the service:

    DIR/<package path>/<service>.proto          the gRPC contract (`tensorwire proto`)
    DIR/<package path>/<service>.schema.json    the JSON contract (`GET /schema.json`)
    DIR/tensorwire/v1/types.proto               what the .proto imports

The `.proto` is the lock on field numbers (`tensorwire.protobuf.lock`). The check
compares the contract generated now with the published one on both wires: `buf
breaking` on the `.proto` trees (`tensorwire.ops.buf`), and tensorwire's own JSON-side
rules on the two `schema.json` documents (`tensorwire.contract.compat`). The JSON-side
facts (required inputs, constraints, routes) are read from the companion `schema.json`
rather than from comments or custom options of the `.proto`: it is the very document
HTTP clients read, already derived from the descriptor, and it keeps the `.proto` what
protoc users expect. buf's findings are reworded to name the API and the parameter.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP
from google.protobuf.descriptor_pb2 import FileDescriptorProto

from .. import v1
from ..contract.compat import Finding, json_breaking
from ..contract.descriptor import ServiceSpec
from ..http.schema import schema_json
from ..naming import camel, snake
from ..protobuf.descriptors import ServiceProto, locked_service_proto
from ..protobuf.lock import LockError, read_published
from ..protobuf.parse import ProtoFile
from . import buf as bufcli

SCHEMA_SUFFIX = ".schema.json"
FIELD_RENUMBERED = "FIELD_RENUMBERED"
ENUM_VALUE_RENUMBERED = "ENUM_VALUE_RENUMBERED"
_TYPES_PATH = Path(v1.PROTO_NAME)


def schema_path(proto_path: Path) -> Path:
    """The published `schema.json` beside a published `.proto`."""
    return proto_path.with_name(proto_path.name.removesuffix(".proto") + SCHEMA_SUFFIX)


def schema_text(spec: ServiceSpec) -> bytes:
    """The service's schema.json as published: sorted keys, so diffs stay small."""
    return orjson.dumps(schema_json(spec), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                        | orjson.OPT_NON_STR_KEYS) + b"\n"


def publish(spec: ServiceSpec, proto: ServiceProto, out: Path) -> list[Path]:
    """Write the contract tree into `out`; returns the files written."""
    proto_path = out / proto.file_name
    files = {proto_path: proto.proto_text().encode(),
             schema_path(proto_path): schema_text(spec),
             out / _TYPES_PATH: v1.proto_source().encode()}
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return list(files)


# ------------------------------------------------------------------------ the check
@dataclass
class Report:
    """What `--check` found, per wire, and what it could not check."""

    published: Path
    grpc: list[Finding] = field(default_factory=list)
    json: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def breaking(self) -> bool:
        return bool(self.grpc or self.json)

    def render(self) -> str:
        out = [f"contract check against {self.published}:"]
        for title, found in (("gRPC (.proto)", self.grpc), ("JSON/HTTP (schema.json)",
                                                            self.json)):
            if found:
                out.append(f"{title}:")
                out.extend(f"  {f}" for f in found)
        n = len(self.grpc) + len(self.json)
        out.append(f"{n} breaking change{'s' if n != 1 else ''}." if n else
                   "no breaking changes.")
        return "\n".join(out) + "\n"


def check(spec: ServiceSpec, proto: ServiceProto, published: str | Path) -> Report:
    """Compare contract `proto` (and the service's schema.json) with the published one."""
    path, parsed = read_published(published, proto.file_name)
    report = Report(path)
    names = _Names(spec, proto.file_proto, parsed)
    renumbered = _renumbered(parsed, proto.file_proto, names)
    buf = bufcli.find_buf()
    annotations: list[bufcli.Annotation] = []
    if buf is None:
        report.notes.append(bufcli.INSTALL_HINT)
    else:
        types = Path(published) / _TYPES_PATH if Path(published).is_dir() else None
        annotations = _buf_breaking(buf, proto, path, types)
    report.grpc = _merge(renumbered, annotations, names, parsed)
    companion = schema_path(path)
    try:
        old = orjson.loads(companion.read_bytes())
    except FileNotFoundError:
        report.notes.append(f"no {companion} was published, so the JSON/HTTP side was not "
                            f"checked: publish with `tensorwire proto ... --out`")
    except (OSError, orjson.JSONDecodeError) as exc:
        raise LockError(f"cannot read {companion}: {exc}") from None
    else:
        report.json = json_breaking(old, schema_json(spec))
    return report


def _buf_breaking(buf: str, proto: ServiceProto, published: Path, types: Path | None
                  ) -> list[bufcli.Annotation]:
    """buf on two trees holding only the service file and types.proto each, so that
    whatever else a published folder holds does not take part."""
    with tempfile.TemporaryDirectory(prefix="tensorwire-contract-") as tmp:
        new, old = Path(tmp, "new"), Path(tmp, "old")
        for root in (new, old):
            (root / _TYPES_PATH).parent.mkdir(parents=True)
            (root / proto.file_name).parent.mkdir(parents=True, exist_ok=True)
        (new / proto.file_name).write_text(proto.proto_text(), encoding="utf-8")
        (new / _TYPES_PATH).write_text(v1.proto_source(), encoding="utf-8")
        shutil.copyfile(published, old / proto.file_name)
        if types is not None and types.is_file():
            shutil.copyfile(types, old / _TYPES_PATH)
        else:
            (old / _TYPES_PATH).write_text(v1.proto_source(), encoding="utf-8")
        return bufcli.breaking(buf, new, old)


class _Names:
    """Says which API and parameter a message field, enum value or rpc belongs to."""

    def __init__(self, spec: ServiceSpec, current: FileDescriptorProto,
                 published: ProtoFile) -> None:
        self.apis = {camel(name): name for name in spec.apis}
        for svc in published.services.values():
            for rpc in svc.rpcs:
                self.apis.setdefault(rpc, snake(rpc))
        self.roles: dict[str, tuple[str, str]] = {}
        for rpc, api in self.apis.items():
            self.roles[f"{rpc}Request"] = (api, "input")
            self.roles[f"{rpc}Response"] = (api, "output field")
        # Which APIs reach a model message or an enum (through the published file,
        # which is what clients hold, and the current one).
        refs: dict[str, set[str]] = defaultdict(set)
        prefix = "." + current.package + "."
        for msg in current.message_type:
            for f in msg.field:
                if f.type in (FDP.TYPE_MESSAGE, FDP.TYPE_ENUM):
                    refs[msg.name].add(f.type_name.removeprefix(prefix))
            for entry in msg.nested_type:  # map<K, V> entries
                for f in entry.field:
                    refs[msg.name].add(f.type_name.removeprefix(prefix))
        for pmsg in published.messages.values():
            for pf in pmsg.fields:
                type_name = pf.type.split(",")[-1].strip(" >").lstrip(".")
                refs[pmsg.name].add(type_name.removeprefix(published.package + "."))
        self.users: dict[str, list[str]] = defaultdict(list)
        for rpc, api in self.apis.items():
            seen: set[str] = set()
            todo = [f"{rpc}Request", f"{rpc}Response"]
            while todo:
                name = todo.pop()
                if name in seen:
                    continue
                seen.add(name)
                self.users[name].append(api)
                todo.extend(refs.get(name, ()))

    def api_of(self, type_name: str) -> str | None:
        role = self.roles.get(type_name)
        if role is not None:
            return role[0]
        users = sorted(set(self.users.get(type_name, [])))
        return ", ".join(users) or None

    def field(self, message: str, name: str) -> tuple[str | None, str]:
        role = self.roles.get(message)
        if role is not None:
            return role[0], f'{role[1]} "{name}"'
        return self.api_of(message), f'{message} field "{name}"'

    def enum_value(self, enum: str, name: str) -> tuple[str | None, str]:
        return self.api_of(enum), f"enum {enum} value {name}"


#: What a finding is about: ("field", message, number), ("enum", enum, number) or
#: ("rpc", rpc, service), numbers as the published file has them.
Subject = tuple[str, str, str]


def _renumbered(published: ProtoFile, current: FileDescriptorProto, names: _Names
                ) -> dict[Subject, Finding]:
    """Fields and enum values whose name stayed while their number moved: an old client
    sends (or reads) them under the old number, where something else, or nothing, is."""
    out: dict[Subject, Finding] = {}
    messages = {m.name: m for m in current.message_type}
    for pmsg in published.messages.values():
        cur = messages.get(pmsg.name)
        if cur is None:
            continue
        numbers = {f.name: f.number for f in cur.field}
        owners = {f.number: f.name for f in cur.field}
        for pf in pmsg.fields:
            now = numbers.get(pf.name)
            if now is None or now == pf.number:
                continue
            there = owners.get(pf.number)
            api, where = names.field(pmsg.name, pf.name)
            into = f'into "{there}"' if there else "into a number nothing reads"
            out[("field", pmsg.name, str(pf.number))] = Finding(
                api, where, f"renumbered from {pf.number} to {now}: a client built from "
                f"the published .proto sends it {into}; serve with --proto-lock (or pin "
                f"FieldNumber({pf.number}))", FIELD_RENUMBERED, "grpc")
    enums = {e.name: e for e in current.enum_type}
    for penum in published.enums.values():
        cur_enum = enums.get(penum.name)
        if cur_enum is None:
            continue
        values = {v.name: v.number for v in cur_enum.value}
        for value, number in penum.values.items():
            now = values.get(value)
            if now is not None and now != number:
                api, where = names.enum_value(penum.name, value)
                out[("enum", penum.name, str(number))] = Finding(
                    api, where, f"renumbered from {number} to {now}: old clients read "
                    "another value; serve with --proto-lock", ENUM_VALUE_RENUMBERED, "grpc")
    return out


_FIELD = re.compile(r'^(?:Previously present )?[Ff]ield "(\d+)".*? on message "([^"]+)"')
_ENUM_VALUE = re.compile(r'^(?:Previously present )?[Ee]num value "(-?\d+)".*? on enum '
                         r'"([^"]+)"')
_RPC = re.compile(r'RPC "([^"]+)" on service "([^"]+)"')
_SEE = re.compile(r"\s*See https?://\S+.*$")


def _subject(message: str) -> Subject | None:
    """What a buf message is about, read from buf's wording."""
    m = _FIELD.search(message)
    if m:
        return "field", m.group(2), m.group(1)
    m = _ENUM_VALUE.search(message)
    if m:
        return "enum", m.group(2), m.group(1)
    m = _RPC.search(message)
    if m:
        return "rpc", m.group(1), m.group(2)
    return None


def _merge(renumbered: dict[Subject, Finding], annotations: Iterable[bufcli.Annotation],
           names: _Names, published: ProtoFile) -> list[Finding]:
    """buf's findings grouped by the field (or value, or rpc) they are about and named by
    API and parameter; those about a renumbered field's old number join its finding."""
    groups: dict[Subject | int, list[bufcli.Annotation]] = {}
    for i, a in enumerate(annotations):
        groups.setdefault(_subject(a.message) or i, []).append(a)
    old_fields = {m.name: {f.number: f.name for f in m.fields}
                  for m in published.messages.values()}
    old_values = {e.name: {n: v for v, n in e.values.items()}
                  for e in published.enums.values()}
    found = dict(renumbered)
    rest: list[Finding] = []
    for subject, group in groups.items():
        rules = sorted({a.rule for a in group})
        if subject in found:  # buf's view of a renumbering: one finding says it all
            f = found[subject]
            found[subject] = Finding(f.api, f.where, f.message,
                                     ", ".join([f.rule, *rules]), f.side)
            continue
        text = " ".join(_SEE.sub("", a.message) for a in sorted(group, key=lambda a: a.rule))
        if not isinstance(subject, tuple):
            api, where = None, f"{group[0].path}:{group[0].line}"
        elif subject[0] == "field":
            name = old_fields.get(subject[1], {}).get(int(subject[2]), f"#{subject[2]}")
            api, where = names.field(subject[1], name)
        elif subject[0] == "enum":
            name = old_values.get(subject[1], {}).get(int(subject[2]), f"#{subject[2]}")
            api, where = names.enum_value(subject[1], name)
        else:
            api, where = names.apis.get(subject[1], snake(subject[1])), f"rpc {subject[1]}"
            if "RPC_NO_DELETE" in rules:
                text = (f"deleted from service {subject[2]}: gRPC clients calling it get "
                        "UNIMPLEMENTED")
            else:  # a unary rpc made streaming or the other way (RPC_SAME_*_STREAMING)
                text = (_RPC.sub("", text).strip().rstrip(".") + ": a client generated "
                        "from the published .proto calls it as it was, and every call "
                        "fails")
        rest.append(Finding(api, where, text, ", ".join(rules), "grpc"))
    return [*found.values(), *rest]


# ----------------------------------------------------------------------------- CLI
def proto_command(spec: ServiceSpec, *, against: str | None = None, check_dir: str | None = None,
                  out: str | None = None) -> int:
    """`tensorwire proto` with its contract options; returns the exit status."""
    try:
        proto = locked_service_proto(spec, against)
        if check_dir is not None:
            report = check(spec, proto, check_dir)
            for note in report.notes:
                print(f"tensorwire: note: {note}", file=sys.stderr)
            sys.stdout.write(report.render())
            return 1 if report.breaking else 0
        if out is not None:
            existing = Path(out) / proto.file_name
            if against is None and existing.exists():  # would renumber what clients hold
                raise LockError(f"{existing} is published already: publish again with "
                                f"--against {out} to keep its numbers (or remove it to "
                                "start over)")
            for path in publish(spec, proto, Path(out)):
                print(f"wrote {path}", file=sys.stderr)
            return 0
    except (LockError, bufcli.BufError) as exc:
        print(f"tensorwire: error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(proto.proto_text())
    return 0


def lock_problem(spec: ServiceSpec, published: str | None) -> str | None:
    """Why serving with lock `published` cannot start (None: it can)."""
    try:
        locked_service_proto(spec, published)
    except LockError as exc:
        return str(exc)
    return None


__all__ = ["Report", "check", "lock_problem", "proto_command", "publish", "schema_path"]
