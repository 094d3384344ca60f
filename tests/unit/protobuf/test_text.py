"""The printed .proto: it imports tensorwire/v1/types.proto only where it uses it, so
protoc compiles it without warnings, and it marks required inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field

import tensorwire
from examples.llm_stream import LanguageModel
from examples.quickstart import Quickstart
from tensorwire.protobuf.descriptors import ServiceProto
from tests.support.protoc import protoc

IMPORT = 'import "tensorwire/v1/types.proto";'


@tensorwire.service
class Plain:
    """Nothing here needs tensorwire's vocabulary: no tensor, file, JSON value, root
    input or required input."""

    @tensorwire.api
    def hello(self, name: str = "you", times: int = 1) -> str:
        return f"hi {name}" * times


@tensorwire.service
class Needy:
    @tensorwire.api
    def greet(self, name: str = Field(description="who"), punct: str = "!") -> str:
        return name + punct


def compile_warnings(service: type, tmp_path: Path) -> str:
    proto = ServiceProto(tensorwire.get_service_spec(service))
    path = tmp_path / proto.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(proto.proto_text())
    proto_root = Path(tensorwire.v1.__file__).parents[2]
    done = protoc(f"-I{tmp_path}", f"-I{proto_root}", f"--python_out={tmp_path}",
                  proto.file_name)
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize("service", [Plain, Needy, Quickstart, LanguageModel])
def test_protoc_compiles_every_contract_without_a_warning(service, tmp_path: Path):
    assert compile_warnings(service, tmp_path) == ""


def test_the_import_is_printed_only_when_the_file_uses_the_vocabulary():
    plain = ServiceProto(tensorwire.get_service_spec(Plain))
    assert IMPORT not in plain.proto_text()
    assert "tensorwire proto --types" not in plain.proto_text()  # the header's pointer
    # the descriptor keeps the dependency: a reflection client reads from it whether
    # the server can mark root inputs and required fields
    assert "tensorwire/v1/types.proto" in plain.file_proto.dependency
    assert IMPORT in ServiceProto(tensorwire.get_service_spec(Needy)).proto_text()


def test_required_inputs_are_marked_and_inputs_with_defaults_are_not():
    text = ServiceProto(tensorwire.get_service_spec(Needy)).proto_text()
    assert "optional string name = 1 [(tensorwire.v1.required) = true];" in text
    assert "optional string punct = 2;" in text
    quick = ServiceProto(tensorwire.get_service_spec(Quickstart)).proto_text()
    assert "message UpperRequest {\n  optional string text = 1 [(tensorwire.v1.required) " \
           "= true];" in quick  # a root input without a default
