"""The published .proto as a lock: numbers kept, new ones above, removed ones reserved.

No `from __future__ import annotations` here: each version of the service is declared
inside a function, with its own local `Item` and `Mode`, and the annotations must be
evaluated where those names are in scope.
"""

import enum
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.codecs.core import REPLY
from tensorwire.contract.descriptor import ServiceSpec
from tensorwire.ops.loader import load_service
from tensorwire.protobuf.descriptors import (
    ServiceProto,
    locked_service_proto,
    proto_file_name,
    service_proto,
)
from tensorwire.protobuf.lock import LockError, ProtoLock, load_lock
from tensorwire.protobuf.parse import parse_proto
from tensorwire.validators import FieldNumber
from tests.support.protoc import protoc


def v1() -> ServiceSpec:
    class Mode(enum.Enum):
        fast = "fast"
        exact = "exact"

    class Item(BaseModel):
        name: str
        qty: int = 1

    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: int, note: str = "", tail: str = "", mode: Mode = Mode.fast,
                 item: Item | None = None) -> Item:
            return Item(name=note)

        @tensorwire.api
        def ping(self, text: str) -> str:
            return text

    return tensorwire.get_service_spec(LockDemo)


def v2(extra_pin: int | None = None, note_pin: int | None = None, tail: bool = False
       ) -> ServiceSpec:
    """v1 with `extra` inserted after `x` and `tail` gone (back if `tail`); Mode gained
    `careful` between its values and lost nothing; Item gained `sku` in the middle."""

    class Mode(enum.Enum):
        fast = "fast"
        careful = "careful"
        exact = "exact"

    class Item(BaseModel):
        name: str
        sku: str = ""
        qty: int = 1

    extra_t = Annotated[str, FieldNumber(extra_pin)] if extra_pin else str
    note_t = Annotated[str, FieldNumber(note_pin)] if note_pin else str

    if tail:
        @tensorwire.service(name="lockdemo")
        class LockDemo:
            @tensorwire.api
            def echo(self, x: int, extra: extra_t = "", note: note_t = "",
                     mode: Mode = Mode.fast, item: Item | None = None, tail: str = "",
                     modes: list[Mode] | None = None, by_name: dict[str, Mode] | None = None
                     ) -> Item:
                return Item(name=note)
    else:
        @tensorwire.service(name="lockdemo")
        class LockDemo:  # type: ignore[no-redef]
            @tensorwire.api
            def echo(self, x: int, extra: extra_t = "", note: note_t = "",
                     mode: Mode = Mode.fast, item: Item | None = None,
                     modes: list[Mode] | None = None, by_name: dict[str, Mode] | None = None
                     ) -> Item:
                return Item(name=note)

    return tensorwire.get_service_spec(LockDemo)


def v3() -> ServiceSpec:
    """v1 where Mode lost `fast` and gained `slow`."""

    class Mode(enum.Enum):
        exact = "exact"
        slow = "slow"

    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: int, mode: Mode = Mode.exact) -> str:
            return ""

    return tensorwire.get_service_spec(LockDemo)


def publish(tmp_path: Path, proto: ServiceProto) -> Path:
    """Write the contract where a lock is read from; returns the tree."""
    path = tmp_path / proto.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(proto.proto_text())
    return tmp_path


def numbers(proto: ServiceProto, message: str) -> dict[str, int]:
    (msg,) = [m for m in proto.file_proto.message_type if m.name == message]
    return {f.name: f.number for f in msg.field}


def enum_numbers(proto: ServiceProto, name: str) -> dict[str, int]:
    (enum_,) = [e for e in proto.file_proto.enum_type if e.name == name]
    return {v.name: v.number for v in enum_.value}


def lock_of(tree: Path, spec: ServiceSpec) -> ProtoLock:
    return load_lock(tree, proto_file_name(spec))


def test_without_a_lock_an_inserted_input_shifts_every_number_after_it():
    assert numbers(ServiceProto(v1()), "EchoRequest") == {
        "x": 1, "note": 2, "tail": 3, "mode": 4, "item": 5}
    assert numbers(ServiceProto(v2()), "EchoRequest")["note"] == 3


def test_published_numbers_are_kept_and_new_inputs_go_above_the_highest(tmp_path):
    tree = publish(tmp_path, ServiceProto(v1()))
    locked = ServiceProto(v2(), lock_of(tree, v2()))
    assert numbers(locked, "EchoRequest") == {
        "x": 1, "extra": 6, "note": 2, "mode": 4, "item": 5, "modes": 7, "by_name": 8}
    text = locked.proto_text()
    # the removed input's number and name stay reserved
    assert "  optional string extra = 6;\n" in text
    assert '  reserved 3;\n  reserved "tail";\n}' in text
    (req,) = [m for m in locked.file_proto.message_type if m.name == "EchoRequest"]
    assert [(r.start, r.end) for r in req.reserved_range] == [(3, 4)]
    assert list(req.reserved_name) == ["tail"]


def test_nested_model_messages_and_enum_values_are_locked_too(tmp_path):
    tree = publish(tmp_path, ServiceProto(v1()))
    locked = ServiceProto(v2(), lock_of(tree, v2()))
    assert numbers(locked, "Item") == {"name": 1, "sku": 3, "qty": 2}
    assert enum_numbers(locked, "Mode") == {
        "MODE_UNSPECIFIED": 0, "MODE_FAST": 1, "MODE_CAREFUL": 3, "MODE_EXACT": 2}
    assert numbers(ServiceProto(v2()), "Item") == {"name": 1, "sku": 2, "qty": 3}


def test_a_removed_enum_value_is_reserved_and_a_new_one_goes_above(tmp_path):
    tree = publish(tmp_path, ServiceProto(v1()))
    locked = ServiceProto(v3(), lock_of(tree, v3()))
    assert enum_numbers(locked, "Mode") == {"MODE_UNSPECIFIED": 0, "MODE_EXACT": 2,
                                            "MODE_SLOW": 3}
    assert '  MODE_SLOW = 3;\n  reserved 1;\n  reserved "MODE_FAST";\n}' in \
        locked.proto_text()


def test_a_reserved_number_is_never_reused_in_later_generations(tmp_path):
    first = publish(tmp_path / "a", ServiceProto(v1()))
    second = publish(tmp_path / "b", ServiceProto(v2(), lock_of(first, v2())))
    # `tail` comes back: a new number (its old one stays reserved), its name free again
    third = ServiceProto(v2(tail=True), lock_of(second, v2(tail=True)))
    assert numbers(third, "EchoRequest")["tail"] == 9
    assert '  reserved 3;\n}' in third.proto_text()
    assert '"tail"' not in third.proto_text()


def test_generating_against_the_published_file_changes_nothing(tmp_path):
    spec = v1()
    published = ServiceProto(spec).proto_text()
    tree = publish(tmp_path / "a", ServiceProto(spec))
    assert ServiceProto(spec, lock_of(tree, spec)).proto_text() == published
    # and a locked generation (reserved statements and all) reads back to itself
    locked = ServiceProto(v2(), lock_of(tree, v2()))
    again = publish(tmp_path / "b", locked)
    assert ServiceProto(v2(), lock_of(again, v2())).proto_text() == locked.proto_text()


def test_a_locked_file_with_reserved_numbers_and_names_compiles(tmp_path):
    tree = publish(tmp_path / "a", ServiceProto(v1()))
    out = publish(tmp_path / "b", ServiceProto(v3(), lock_of(tree, v3())))
    locked = publish(out, ServiceProto(v2(), lock_of(tree, v2())))
    proto_root = str(Path(tensorwire.v1.__file__).parents[2])
    done = protoc(f"-I{locked}", f"-I{proto_root}", f"--descriptor_set_out={tmp_path / 'x'}",
                  "lockdemo/lockdemo.proto")
    assert done.returncode == 0, done.stderr


def test_a_pin_that_agrees_with_the_lock_is_kept(tmp_path):
    tree = publish(tmp_path, ServiceProto(v1()))
    locked = ServiceProto(v2(note_pin=2, extra_pin=40), lock_of(tree, v2()))
    assert numbers(locked, "EchoRequest")["note"] == 2
    assert numbers(locked, "EchoRequest")["extra"] == 40


@pytest.mark.parametrize(("pins", "names"), [
    ({"note_pin": 9}, ["FieldNumber(9)", "note = 2", "lockdemo/lockdemo.proto"]),
    ({"extra_pin": 2}, ["EchoRequest.extra", "FieldNumber(2)", "'note'"]),
])
def test_a_pin_that_contradicts_the_lock_is_an_error_naming_both(tmp_path, pins, names):
    tree = publish(tmp_path, ServiceProto(v1()))
    with pytest.raises(LockError) as info:
        ServiceProto(v2(**pins), lock_of(tree, v2()))
    for name in names:
        assert name in str(info.value)


def test_a_pin_on_a_reserved_number_is_an_error():
    published = parse_proto("message EchoRequest { optional int64 x = 1; reserved 3; }")
    with pytest.raises(LockError, match=r"EchoRequest.extra: FieldNumber\(3\) is reserved"):
        ServiceProto(v2(extra_pin=3), ProtoLock.from_file(published, "p.proto"))


def test_locked_enum_values_are_read_and_written_by_their_published_numbers(tmp_path):
    tree = publish(tmp_path, ServiceProto(v1()))
    spec = v2()
    locked = ServiceProto(spec, lock_of(tree, spec)).messages["echo"]
    plain = ServiceProto(spec).messages["echo"]  # both in one process, each its own
    Mode = spec.apis["echo"].field_by_name["mode"].annotation
    values = {"x": 1, "mode": Mode.exact, "modes": [Mode.careful, Mode.exact],
              "by_name": {"a": Mode.careful}}
    msg = locked.request(values)
    assert (msg.mode, list(msg.modes), dict(msg.by_name)) == (2, [3, 2], {"a": 3})
    assert plain.request(values).mode == 3
    back = locked.request_values(locked.parse_request(msg.SerializeToString()), REPLY)
    assert back["mode"] is Mode.exact
    assert back["modes"] == [Mode.careful, Mode.exact]
    assert back["by_name"] == {"a": Mode.careful}


def test_the_lock_is_read_from_a_tree_or_the_file_itself(tmp_path):
    tree = publish(tmp_path, ServiceProto(v1()))
    spec = v2()
    by_tree = lock_of(tree, spec)
    by_file = load_lock(tree / "lockdemo" / "lockdemo.proto", "ignored.proto")
    assert by_tree.messages == by_file.messages
    assert service_proto(spec, by_tree) is service_proto(spec, lock_of(tree, spec))
    assert locked_service_proto(spec, str(tree)) is service_proto(spec, by_tree)
    assert locked_service_proto(spec, None) is service_proto(spec)


def test_a_missing_or_broken_published_file_is_an_error_naming_it(tmp_path):
    with pytest.raises(LockError) as info:
        load_lock(tmp_path, "lockdemo/lockdemo.proto")
    assert str(tmp_path / "lockdemo" / "lockdemo.proto") in str(info.value)
    assert "tensorwire proto MODULE:Class --out" in str(info.value)
    bad = tmp_path / "bad.proto"
    bad.write_text("message A {\n  int32 x = ;\n}\n")
    with pytest.raises(LockError, match=r"bad.proto: line 2"):
        load_lock(bad, "")


def test_reserved_ranges_from_the_published_file_are_skipped_and_kept(tmp_path):
    published = parse_proto("""
        syntax = "proto3";
        package lockdemo;
        message EchoRequest {
          optional int64 x = 1;
          reserved 2 to 5, 7, 100 to max;
          reserved "old";
        }
        enum Mode { MODE_UNSPECIFIED = 0; MODE_EXACT = 9; reserved 10 to max; }
    """)
    lock = ProtoLock.from_file(published, "p.proto")
    proto = ServiceProto(v1(), lock)
    # new fields above the highest used (7), skipping `100 to max`'s numbers only later
    assert numbers(proto, "EchoRequest") == {"x": 1, "note": 8, "tail": 9, "mode": 10,
                                             "item": 11}
    assert enum_numbers(proto, "Mode") == {"MODE_UNSPECIFIED": 0, "MODE_FAST": 1,
                                           "MODE_EXACT": 9}
    text = proto.proto_text()
    assert '  reserved 2 to 5, 7, 100 to max;\n  reserved "old";\n}' in text
    assert "  reserved 10 to max;\n}" in text


def pets() -> ServiceSpec:
    """A discriminated union: a message with a oneof."""

    class Cat(BaseModel):
        kind: Literal["cat"] = "cat"
        lives: int = 9

    class Dog(BaseModel):
        kind: Literal["dog"] = "dog"
        good: bool = True

    @tensorwire.service(name="pets")
    class Pets:
        @tensorwire.api
        def describe(self, pet: Cat | Dog = Field(discriminator="kind")) -> str:
            return ""

    return tensorwire.get_service_spec(Pets)


@pytest.mark.parametrize("target", [
    "examples.audio:AudioFiles", "examples.constrained:TextGenerator",
    "examples.descriptors:Retrieval", "examples.frames:Frames", "examples.images:ImageTools",
    "examples.iris:Iris", "examples.llm_stream:LanguageModel",
    "examples.models:ReviewAnalyzer", "examples.quickstart:Quickstart", None])
def test_every_example_reads_back_from_its_published_file_unchanged(tmp_path, target):
    spec = load_service(target) if target else pets()
    text = ServiceProto(spec).proto_text()
    tree = publish(tmp_path, ServiceProto(spec))
    assert ServiceProto(spec, lock_of(tree, spec)).proto_text() == text
