"""`tensorwire proto --out / --against / --check`: publishing, and what the check catches.

The check runs the real `buf` (buf-bin, in the dev extra). No `from __future__ import
annotations`: each version of the service is declared inside a function.
"""

import json
import typing as t
from pathlib import Path

import pytest
from annotated_types import Le

import tensorwire
from tensorwire.contract.compat import (
    CONSTRAINT_NARROWED,
    NEW_REQUIRED_INPUT,
    ROUTE_REMOVED,
    TYPE_CHANGED,
    Finding,
)
from tensorwire.contract.descriptor import ServiceSpec
from tensorwire.ops import buf as bufcli
from tensorwire.ops import contract
from tensorwire.ops.sources import load_settings, read_config_file
from tensorwire.protobuf.descriptors import ServiceProto, locked_service_proto
from tensorwire.protobuf.lock import LockError


def published_v1() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: t.Annotated[int, Le(10)], note: str = "") -> str:
            return note

        @tensorwire.api
        def ping(self, text: str) -> str:
            return text

    return tensorwire.get_service_spec(LockDemo)


def with_optional_input_inserted() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: t.Annotated[int, Le(10)], extra: str = "", note: str = "") -> str:
            return note

        @tensorwire.api
        def ping(self, text: str) -> str:
            return text

    return tensorwire.get_service_spec(LockDemo)


def with_optional_input_at_the_end() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: t.Annotated[int, Le(10)], note: str = "", extra: int = 0) -> str:
            return note

        @tensorwire.api
        def ping(self, text: str) -> str:
            return text

    return tensorwire.get_service_spec(LockDemo)


def with_type_changed() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: str, note: str = "") -> str:
            return note

        @tensorwire.api
        def ping(self, text: str) -> str:
            return text

    return tensorwire.get_service_spec(LockDemo)


def with_rpc_removed() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: t.Annotated[int, Le(10)], note: str = "") -> str:
            return note

    return tensorwire.get_service_spec(LockDemo)


def with_required_input_and_narrowed_le() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: t.Annotated[int, Le(5)], note: str = "", y: int = ...) -> str:
            return note

        @tensorwire.api
        def ping(self, text: str) -> str:
            return text

    return tensorwire.get_service_spec(LockDemo)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    spec = published_v1()
    contract.publish(spec, ServiceProto(spec), tmp_path / "published")
    return tmp_path / "published"


def check(spec: ServiceSpec, tree: Path, locked: bool = False) -> contract.Report:
    proto = locked_service_proto(spec, str(tree) if locked else None)
    return contract.check(spec, proto, tree)


def about(found: list[Finding]) -> list[tuple[str | None, str, str]]:
    return [(f.api, f.where, f.rule) for f in found]


def test_publishing_writes_the_proto_its_schema_json_and_types_proto(tree: Path):
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert files == ["lockdemo/lockdemo.proto", "lockdemo/lockdemo.schema.json",
                     "tensorwire/v1/types.proto"]
    schema = json.loads((tree / "lockdemo/lockdemo.schema.json").read_text())
    assert [r["name"] for r in schema["routes"]] == ["echo", "ping"]
    assert (tree / "tensorwire/v1/types.proto").read_text() == tensorwire.v1.proto_source()


def test_an_unchanged_contract_has_no_breaking_changes(tree: Path):
    report = check(published_v1(), tree)
    assert (report.grpc, report.json, report.notes) == ([], [], [])
    assert report.render().endswith("no breaking changes.\n")


def test_a_renumbered_field_is_caught_naming_the_api_and_the_parameter(tree: Path):
    report = check(with_optional_input_inserted(), tree)
    (found,) = report.grpc
    assert (found.api, found.where) == ("echo", 'input "note"')
    assert found.rule.startswith("FIELD_RENUMBERED, ")  # buf's findings joined it
    assert "FIELD_SAME_NAME" in found.rule
    assert 'renumbered from 2 to 3' in found.message and 'into "extra"' in found.message
    assert report.json == [] and report.breaking


def test_an_added_optional_input_is_silent_with_the_lock_or_at_the_end(tree: Path):
    assert not check(with_optional_input_inserted(), tree, locked=True).breaking
    assert not check(with_optional_input_at_the_end(), tree).breaking


def test_a_changed_type_is_caught_on_both_wires(tree: Path):
    report = check(with_type_changed(), tree, locked=True)
    assert about(report.grpc) == [("echo", 'input "x"', "FIELD_WIRE_JSON_COMPATIBLE_TYPE")]
    assert 'changed type from "int64" to "string"' in report.grpc[0].message
    assert "See https://" not in report.grpc[0].message
    assert about(report.json) == [("echo", 'input "x"', TYPE_CHANGED)]


def test_a_removed_rpc_is_caught_on_both_wires(tree: Path):
    report = check(with_rpc_removed(), tree)
    assert about(report.grpc) == [("ping", "rpc Ping", "RPC_NO_DELETE")]
    assert "UNIMPLEMENTED" in report.grpc[0].message
    assert about(report.json) == [("ping", "POST /ping", ROUTE_REMOVED)]


def with_ping_streaming_in() -> ServiceSpec:
    @tensorwire.service(name="lockdemo")
    class LockDemo:
        @tensorwire.api
        def echo(self, x: t.Annotated[int, Le(10)], note: str = "") -> str:
            return note

        @tensorwire.api
        def ping(self, text: t.Iterator[str]) -> str:
            return "".join(text)

    return tensorwire.get_service_spec(LockDemo)


def test_a_unary_rpc_made_streaming_is_caught_on_both_wires(tree: Path):
    """Same messages, same fields: only the rpc's cardinality changed, and a client of
    the published contract (unary call, POST) fails every call."""
    report = check(with_ping_streaming_in(), tree, locked=True)
    assert about(report.grpc) == [("ping", "rpc Ping", "RPC_SAME_CLIENT_STREAMING")]
    assert "client unary to client streaming" in report.grpc[0].message
    assert "every call fails" in report.grpc[0].message
    assert about(report.json) == [("ping", "input", TYPE_CHANGED)]
    assert "one value (POST) to a stream (WebSocket)" in report.json[0].message


def test_a_streamed_input_made_unary_is_caught_too(tmp_path: Path):
    streaming = with_ping_streaming_in()
    contract.publish(streaming, ServiceProto(streaming), tmp_path)
    report = check(published_v1(), tmp_path, locked=True)
    assert about(report.grpc) == [("ping", "rpc Ping", "RPC_SAME_CLIENT_STREAMING")]
    assert about(report.json) == [("ping", "input", TYPE_CHANGED)]


def test_a_new_required_input_and_a_narrowed_le_are_caught(tree: Path):
    report = check(with_required_input_and_narrowed_le(), tree, locked=True)
    assert report.grpc == []
    assert about(report.json) == [("echo", 'input "y"', NEW_REQUIRED_INPUT),
                                  ("echo", 'input "x"', CONSTRAINT_NARROWED)]
    assert "from <= 10 to <= 5" in report.json[1].message
    text = report.render()
    assert 'echo: input "y": new required input' in text
    assert text.endswith("2 breaking changes.\n")


def test_without_buf_the_check_says_how_to_install_it_and_still_runs(tree: Path,
                                                                     monkeypatch):
    monkeypatch.setattr(bufcli, "find_buf", lambda: None)
    report = check(with_optional_input_inserted(), tree)
    assert report.notes == [bufcli.INSTALL_HINT]
    assert "pip install 'tensorwire[contract]'" in bufcli.INSTALL_HINT
    assert about(report.grpc) == [("echo", 'input "note"', "FIELD_RENUMBERED")]
    report = check(with_required_input_and_narrowed_le(), tree, locked=True)
    assert [f.rule for f in report.json] == [NEW_REQUIRED_INPUT, CONSTRAINT_NARROWED]


def test_without_a_published_schema_json_only_the_proto_is_checked(tree: Path):
    (tree / "lockdemo/lockdemo.schema.json").unlink()
    report = check(with_required_input_and_narrowed_le(), tree, locked=True)
    assert report.json == [] and not report.breaking
    assert "lockdemo.schema.json was published" in report.notes[0]


def test_a_published_file_buf_cannot_compile_is_an_error(tree: Path):
    path = tree / "lockdemo/lockdemo.proto"
    # parses for the lock (our reader is lenient), but is no valid proto3
    text = path.read_text()
    broken = text.replace("optional int64 x = 1 [(tensorwire.v1.required) = true];",
                          "optional int64 x = 1; optional int64 y = 1;")
    assert broken != text
    path.write_text(broken)
    with pytest.raises(bufcli.BufError, match="cannot compile"):
        check(published_v1(), tree)


def test_the_proto_command_prints_publishes_and_checks(tree: Path, tmp_path: Path, capsys):
    spec = with_optional_input_inserted()
    assert contract.proto_command(spec, against=str(tree)) == 0
    printed = capsys.readouterr().out
    assert "optional string extra = 3;" in printed and "optional string note = 2;" in printed
    assert contract.proto_command(published_v1(), against=str(tree)) == 0
    assert capsys.readouterr().out == (tree / "lockdemo/lockdemo.proto").read_text()
    assert contract.proto_command(spec, check_dir=str(tree)) == 1
    assert 'echo: input "note": renumbered' in capsys.readouterr().out
    assert contract.proto_command(spec, against=str(tree), out=str(tmp_path / "v2")) == 0
    assert "wrote" in capsys.readouterr().err
    assert "extra = 3;" in (tmp_path / "v2/lockdemo/lockdemo.proto").read_text()
    assert contract.proto_command(spec, check_dir=str(tmp_path / "nowhere")) == 2
    assert "no published contract at" in capsys.readouterr().err


def test_publishing_over_a_published_contract_needs_the_lock(tree: Path, capsys):
    before = (tree / "lockdemo/lockdemo.proto").read_text()
    spec = with_optional_input_inserted()
    assert contract.proto_command(spec, out=str(tree)) == 2
    assert f"publish again with --against {tree}" in capsys.readouterr().err
    assert (tree / "lockdemo/lockdemo.proto").read_text() == before
    assert contract.proto_command(spec, against=str(tree), out=str(tree)) == 0
    assert "optional string extra = 3;" in (tree / "lockdemo/lockdemo.proto").read_text()


def test_a_lock_problem_is_told_before_serving(tree: Path):
    assert contract.lock_problem(published_v1(), str(tree)) is None
    assert contract.lock_problem(published_v1(), None) is None
    assert "no published contract" in contract.lock_problem(published_v1(), "/nowhere")


def test_proto_lock_is_a_setting_of_every_source(tmp_path: Path):
    assert load_settings(env={"TENSORWIRE_PROTO_LOCK": "pub/"}).proto_lock == "pub/"
    assert load_settings({"proto_lock": "flag/"}, env={}).proto_lock == "flag/"
    config = tmp_path / "tw.toml"
    config.write_text('proto_lock = "contract/"\n')
    assert read_config_file(config) == {"proto_lock": "contract/"}


def test_buf_is_found_beside_the_interpreter():
    found = bufcli.find_buf()
    assert found is not None and Path(found).name == "buf"
    with pytest.raises(LockError):
        contract.check(published_v1(), ServiceProto(published_v1()), "/nowhere")
