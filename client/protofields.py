"""gRPC side: messages generated from models, and the fields that hold every element.

A `Model` is a message generated for a pydantic model (a dict in and out; a `oneof`
union picks its variant by the discriminator); a `FieldKind` writes one field of a
request and reads one of a response, singular, repeated or a map, around an element of
`protokinds`. Field kinds are built by `kinds.field_kind`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pydantic import BaseModel

from ..errors import InvalidArgument
from .protokinds import Element, Enum, Loc, Message, Violations, invalid


def _get(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def _is_synthetic(oneof: Any) -> bool:
    """proto3 `optional` wraps one field in a oneof named `_<field>`: not a real one."""
    fields = oneof.fields
    return len(fields) == 1 and oneof.name == "_" + fields[0].name


class Model(Message):
    """A generated message for a pydantic model: a dict (or model) in, a dict out."""

    def __init__(self, desc: Descriptor, resolve: Callable[[FieldDescriptor], FieldKind]
                 ) -> None:
        self.desc = desc
        self.name = desc.name
        self._resolve = resolve
        self._fields: list[tuple[str, FieldKind]] | None = None
        real = [o for o in desc.oneofs if not _is_synthetic(o)]
        #: A discriminated union: `oneof choice { A a; B b; }` covering every field.
        self.union = real[0] if len(real) == 1 and len(real[0].fields) == len(
            desc.fields) else None

    @property
    def fields(self) -> list[tuple[str, FieldKind]]:
        if self._fields is None:  # resolved lazily: messages may be recursive
            self._fields = [(f.name, self._resolve(f)) for f in self.desc.fields]
        return self._fields

    def fill(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        if not isinstance(value, dict | BaseModel):
            raise invalid(loc, f"Input should be a valid dictionary or instance of "
                           f"{self.name}", "model_type")
        if self.union is not None:
            self._fill_variant(value, msg, loc, files)
            return
        msg.SetInParent()
        errors = Violations()
        for name, kind in self.fields:
            item = _get(value, name)
            if item is not None:
                errors.run(kind.write, msg, name, item, (*loc, name), files)
        errors.check()

    def _fill_variant(self, value: Any, msg: Any, loc: Loc, files: Any) -> None:
        for name, kind in self.fields:
            element = kind.element
            if isinstance(element, Model) and element.claims(value):
                kind.write(msg, name, value, loc, files)
                return
        raise invalid(loc, f"the value matches no variant of {self.name}",
                       "union_tag_invalid")

    def claims(self, value: Any) -> bool:
        """Whether `value` carries this variant's tag: a one-value enum field's label."""
        for name, kind in self.fields:
            element = kind.element
            if isinstance(element, Enum) and len(element.labels) == 1:
                tag = _get(value, name)
                if tag is None:
                    continue
                try:
                    element.encode(tag, ())
                except InvalidArgument:
                    return False
                return True
        return False

    def decode(self, raw: Any, files: Any) -> Any:
        if self.union is not None:
            which = raw.WhichOneof(self.union.name)
            if which is None:
                return None
            kind = dict(self.fields)[which]
            return kind.read(raw, which, files)
        return {name: kind.read(raw, name, files) for name, kind in self.fields}

    def summary(self) -> str:
        if self.union is not None:  # a discriminated union: its variants, as HTTP says
            return " | ".join(kind.element.summary() for _, kind in self.fields)
        return self.name


# ---------------------------------------------------------------------- fields


class FieldKind:
    """How one field of a message holds its value: singular, repeated or a map."""

    def __init__(self, fd: FieldDescriptor, element: Element, *, repeated: bool = False,
                 key: Element | None = None) -> None:
        self.fd = fd
        self.element = element
        self.repeated = repeated
        self.key = key  # map fields: the key element (the value element is `element`)
        self.has_presence = getattr(fd, "has_presence", not repeated)

    def write(self, msg: Any, name: str, value: Any, loc: Loc, files: Any) -> None:
        if value is None:
            return
        element = self.element
        try:
            if self.key is not None:
                self._write_map(msg, name, value, loc, files)
            elif self.repeated:
                self._write_list(msg, name, value, loc, files)
            elif element.is_message:
                element.fill(value, getattr(msg, name), loc, files)
            else:
                setattr(msg, name, element.encode(value, loc))
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InvalidArgument):
                raise
            raise invalid(loc, str(exc), "type_error") from None

    def _write_list(self, msg: Any, name: str, value: Any, loc: Loc, files: Any) -> None:
        if isinstance(value, str | bytes | bytearray | dict) or not hasattr(value, "__iter__"):
            raise invalid(loc, "Input should be a valid list", "list_type")
        container = getattr(msg, name)
        element = self.element
        errors = Violations()
        if element.is_message:
            for i, item in enumerate(value):
                errors.run(element.fill, item, container.add(), (*loc, i), files)
        else:
            encoded: list[Any] = []
            for i, item in enumerate(value):
                errors.run(lambda v, at: encoded.append(element.encode(v, at)), item, (*loc, i))
            errors.check()
            container.extend(encoded)
        errors.check()

    def _write_map(self, msg: Any, name: str, value: Any, loc: Loc, files: Any) -> None:
        if not isinstance(value, dict):
            raise invalid(loc, "Input should be a valid dictionary", "dict_type")
        container = getattr(msg, name)
        assert self.key is not None
        element = self.element
        key_element = self.key
        errors = Violations()

        def put(k: Any, v: Any) -> None:
            key = key_element.encode(k, (*loc, k))
            if element.is_message:
                element.fill(v, container[key], (*loc, k), files)
            else:
                container[key] = element.encode(v, (*loc, k))

        for k, v in value.items():
            errors.run(put, k, v)
        errors.check()

    def read(self, msg: Any, name: str, files: Any) -> Any:
        element = self.element
        container = getattr(msg, name)
        if self.key is not None:
            return {k: element.decode(v, files) for k, v in container.items()}
        if self.repeated:
            return [element.decode(v, files) for v in container]
        if self.has_presence and not msg.HasField(name):
            return None
        return element.decode(container, files)

    def summary(self) -> str:
        if self.key is not None:
            return f"dict[{self.key.summary()}, {self.element.summary()}]"
        if self.repeated:
            return f"list[{self.element.summary()}]"
        return self.element.summary()
