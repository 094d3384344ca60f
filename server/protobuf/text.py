"""FileDescriptorProto -> `.proto` source text (what `tensorwire proto` prints).

Deterministic: the output depends only on the descriptor, whose order follows the
service's declaration order. Comments come from the descriptor's SourceCodeInfo, where
protogen put the descriptions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP

from ..v1 import PACKAGE, PROTO_NAME, ROOT_INPUT, field_options_text, is_root_input
from .parse import MAX_ENUM, MAX_FIELD

_SCALARS = {
    FDP.TYPE_DOUBLE: "double", FDP.TYPE_FLOAT: "float", FDP.TYPE_INT64: "int64",
    FDP.TYPE_UINT64: "uint64", FDP.TYPE_INT32: "int32", FDP.TYPE_FIXED64: "fixed64",
    FDP.TYPE_FIXED32: "fixed32", FDP.TYPE_BOOL: "bool", FDP.TYPE_STRING: "string",
    FDP.TYPE_BYTES: "bytes", FDP.TYPE_UINT32: "uint32", FDP.TYPE_SFIXED32: "sfixed32",
    FDP.TYPE_SFIXED64: "sfixed64", FDP.TYPE_SINT32: "sint32", FDP.TYPE_SINT64: "sint64",
}

#: File options printed (in this order) when set: what generators for other languages read.
_FILE_OPTIONS = ("go_package", "java_package", "csharp_namespace")


def uses_vocabulary(fp: descriptor_pb2.FileDescriptorProto) -> bool:
    """Whether the file names a type or an option of tensorwire/v1/types.proto."""
    prefix = f".{PACKAGE}."

    def fields(messages: Iterable[descriptor_pb2.DescriptorProto]
               ) -> Iterator[descriptor_pb2.FieldDescriptorProto]:
        for message in messages:
            yield from message.field
            yield from fields(message.nested_type)

    for fd in fields(fp.message_type):
        if fd.type_name.startswith(prefix) or (
                fd.HasField("options") and field_options_text(fd.options)):
            return True
    return any(m.HasField("options") and is_root_input(m.options)
               for service in fp.service for m in service.method)


def render(fp: descriptor_pb2.FileDescriptorProto, header: str | None = None) -> str:
    comments = {tuple(loc.path): loc.leading_comments for loc in fp.source_code_info.location}
    out: list[str] = []
    if header:
        out.extend(f"// {line}".rstrip() for line in header.splitlines())
        out.append("")
    out.append(f'syntax = "{fp.syntax or "proto2"}";')
    out.append("")
    out.append(f"package {fp.package};")
    out.append("")
    options = [(name, getattr(fp.options, name)) for name in _FILE_OPTIONS
               if fp.options.HasField(name)]
    for name, value in options:
        out.append(f'option {name} = "{value}";')
    if options:
        out.append("")
    # The descriptor always depends on types.proto (reflection clients read from it
    # whether a server can mark root inputs); the text imports it only where used, as
    # protoc warns about an unused import.
    imports = [dep for dep in fp.dependency
               if dep != PROTO_NAME or uses_vocabulary(fp)]
    for dep in imports:
        out.append(f'import "{dep}";')
    if imports:
        out.append("")

    def type_ref(name: str) -> str:
        name = name.lstrip(".")
        prefix = fp.package + "."
        return name[len(prefix):] if name.startswith(prefix) else name

    def comment(path: tuple[int, ...], indent: str) -> None:
        text = comments.get(path)
        if text:
            for line in text.rstrip("\n").split("\n"):
                out.append(f"{indent}//{line}".rstrip())

    for si, svc in enumerate(fp.service):
        comment((6, si), "")
        out.append(f"service {svc.name} {{")
        for mi, m in enumerate(svc.method):
            comment((6, si, 2, mi), "  ")
            stream_in = "stream " if m.client_streaming else ""
            stream_out = "stream " if m.server_streaming else ""
            rpc = (f"  rpc {m.name}({stream_in}{type_ref(m.input_type)}) "
                   f"returns ({stream_out}{type_ref(m.output_type)})")
            if m.HasField("options") and is_root_input(m.options):
                out.append(f"{rpc} {{")
                out.append(f"    option ({ROOT_INPUT.full_name}) = true;")
                out.append("  }")
            else:
                out.append(f"{rpc};")
        out.append("}")
        out.append("")

    def field_type(f: FDP, msg: descriptor_pb2.DescriptorProto) -> str:
        if f.type in (FDP.TYPE_MESSAGE, FDP.TYPE_ENUM):
            return type_ref(f.type_name)
        return _SCALARS[f.type]

    for mi, msg in enumerate(fp.message_type):
        comment((4, mi), "")
        out.append(f"message {msg.name} {{")
        entries = {n.name: n for n in msg.nested_type if n.options.map_entry}
        open_oneof: int | None = None
        for fi, f in enumerate(msg.field):
            real_oneof = f.HasField("oneof_index") and not f.proto3_optional
            if open_oneof is not None and (not real_oneof or f.oneof_index != open_oneof):
                out.append("  }")
                open_oneof = None
            if real_oneof and open_oneof is None:
                open_oneof = f.oneof_index
                out.append(f"  oneof {msg.oneof_decl[f.oneof_index].name} {{")
            indent = "    " if open_oneof is not None else "  "
            comment((4, mi, 2, fi), indent)
            entry_name = f.type_name.rsplit(".", 1)[-1] if f.type == FDP.TYPE_MESSAGE else ""
            if f.label == FDP.LABEL_REPEATED and entry_name in entries:
                key, value = entries[entry_name].field
                decl = f"map<{field_type(key, msg)}, {field_type(value, msg)}>"
            elif f.label == FDP.LABEL_REPEATED:
                decl = f"repeated {field_type(f, msg)}"
            elif f.proto3_optional:
                decl = f"optional {field_type(f, msg)}"
            else:
                decl = field_type(f, msg)
            options = field_options_text(f.options) if f.HasField("options") else []
            suffix = f" [{', '.join(options)}]" if options else ""
            out.append(f"{indent}{decl} {f.name} = {f.number}{suffix};")
        if open_oneof is not None:
            out.append("  }")
        # DescriptorProto ranges end exclusive, EnumDescriptorProto ranges inclusive.
        out.extend(_reserved([(r.start, r.end - 1) for r in msg.reserved_range],
                             msg.reserved_name, MAX_FIELD))
        out.append("}")
        out.append("")

    for ei, enum in enumerate(fp.enum_type):
        comment((5, ei), "")
        out.append(f"enum {enum.name} {{")
        for v in enum.value:
            out.append(f"  {v.name} = {v.number};")
        out.extend(_reserved([(r.start, r.end) for r in enum.reserved_range],
                             enum.reserved_name, MAX_ENUM))
        out.append("}")
        out.append("")

    return "\n".join(out).rstrip("\n") + "\n"


def _reserved(ranges: list[tuple[int, int]], names: Sequence[str], top: int) -> list[str]:
    """`reserved` statements (inclusive ranges): numbers, then names."""
    out = []
    if ranges:
        spelled = [str(lo) if lo == hi else f"{lo} to {'max' if hi >= top else hi}"
                   for lo, hi in ranges]
        out.append(f"  reserved {', '.join(spelled)};")
    if names:
        quoted = ", ".join(f'"{n}"' for n in names)
        out.append(f"  reserved {quoted};")
    return out
