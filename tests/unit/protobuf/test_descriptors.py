"""The generated protobuf contract: names, numbers, presence, enums, golden text."""

from __future__ import annotations

import datetime as dt
import enum
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP
from pydantic import BaseModel, Field

import tensorwire
from examples.models import ReviewAnalyzer
from tensorwire.codecs import REPLY
from tensorwire.contract.decoding import Decoder
from tensorwire.protobuf.descriptors import ServiceProto
from tensorwire.validators import FieldNumber

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


class Color(enum.Enum):
    red = 1
    dark_blue = 2


class Inner(BaseModel):
    z: float
    tags: dict[str, int] = {}


class Everything(BaseModel):
    s: str
    i: int = 0
    f: float = 0.5
    b: bool = False
    raw: bytes = b""
    when: dt.datetime | None = None
    span: dt.timedelta | None = None
    day: dt.date | None = None
    color: Color = Color.red
    mode: t.Literal["a", "b-c"] = "a"
    ints: list[int] = []
    grid: list[list[int]] = []
    inner: Inner | None = None
    inners: list[Inner] = []
    by_key: dict[str, Inner] = {}
    anything: t.Any = None
    blob: dict = {}
    maybe: int | None = None


@tensorwire.service(name="Every")
class EverySvc:
    @tensorwire.api
    def echo(self, value: Everything) -> Everything:
        return value

    @tensorwire.api
    def pinned(
        self,
        first: t.Annotated[int, FieldNumber(7)] = 0,
        second: str = "",
        third: t.Annotated[str, FieldNumber(1)] = "",
        fourth: float = 0.0,
    ) -> int:
        return first


def protoc(*args: str) -> int:
    """grpc_tools' protoc in a subprocess: in-process it can crash a worker that has
    loaded TensorFlow (which bundles its own protobuf)."""
    import grpc_tools

    include = str(Path(grpc_tools.__file__).parent / "_proto")
    return subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{include}", *args],
                          timeout=60).returncode


def proto() -> ServiceProto:
    return ServiceProto(tensorwire.get_service_spec(EverySvc))


def fields(p: ServiceProto, message: str) -> dict[str, FDP]:
    (msg,) = [m for m in p.file_proto.message_type if m.name == message]
    return {f.name: f for f in msg.field}


def test_numbers_follow_declaration_order_and_pins_are_kept():
    f = fields(proto(), "PinnedRequest")
    assert {n: x.number for n, x in f.items()} == {
        "first": 7, "second": 2, "third": 1, "fourth": 3}


def test_every_singular_scalar_has_explicit_presence():
    f = fields(proto(), "Everything")
    for name in ("s", "i", "f", "b", "raw", "color", "mode", "maybe"):
        assert f[name].proto3_optional, name
    assert f["ints"].label == FDP.LABEL_REPEATED
    assert f["inner"].type == FDP.TYPE_MESSAGE and not f["inner"].proto3_optional


def test_well_known_and_fallback_types():
    f = fields(proto(), "Everything")
    assert f["when"].type_name == ".google.protobuf.Timestamp"
    assert f["span"].type_name == ".google.protobuf.Duration"
    assert f["day"].type == FDP.TYPE_STRING  # its JSON form
    # nested lists, Any and untyped dicts: a string of JSON text, marked by an option
    # that holds the value's JSON Schema (google.protobuf.Value would turn 1 into 1.0)
    for name, schema in (("grid", '{"items":{"items":{"type":"integer"},"type":"array"},'
                                  '"type":"array"}'),
                         ("anything", "{}"),
                         ("blob", '{"additionalProperties":true,"type":"object"}')):
        assert f[name].type == FDP.TYPE_STRING and f[name].proto3_optional, name
        assert tensorwire.v1.field_hints(f[name].options).json_schema == schema, name
    assert f["by_key"].type_name.endswith("Everything.ByKeyEntry")


def test_enums_start_at_one_with_an_unspecified_zero():
    p = proto()
    enums = {e.name: [(v.name, v.number) for v in e.value] for e in p.file_proto.enum_type}
    assert enums["Color"] == [("COLOR_UNSPECIFIED", 0), ("COLOR_RED", 1), ("COLOR_DARK_BLUE", 2)]
    (mode,) = [v for k, v in enums.items() if k != "Color"]
    assert [n for _, n in mode] == [0, 1, 2]


def test_round_trip_of_every_standard_type():
    p = proto()
    messages = p.messages["echo"]
    value = Everything(
        s="x", i=-3, f=2.25, b=True, raw=b"\x00\xff", when=dt.datetime(2024, 5, 6, 7, 8, 9,
                                                                      123000, tzinfo=dt.UTC),
        span=dt.timedelta(seconds=-1.5), day=dt.date(2020, 2, 29), color=Color.dark_blue,
        mode="b-c", ints=[1, 2], grid=[[1], [2, 3]], inner=Inner(z=1.0, tags={"k": 1}),
        inners=[Inner(z=2.0)], by_key={"a": Inner(z=3.0)}, anything={"x": [1, "y"]},
        blob={"q": True}, maybe=None)
    wire = messages.request({"value": value}).SerializeToString()
    values = messages.request_values(messages.request_cls.FromString(wire), REPLY)
    back = Decoder(tensorwire.get_service_spec(EverySvc).apis["echo"]).decode_values(values)[
        "value"]
    assert back == value
    reply = messages.response_cls.FromString(messages.response(value).SerializeToString())
    assert Everything.model_validate(messages.response_value(reply)) == value


def test_missing_fields_read_as_missing_so_defaults_apply():
    p = proto()
    messages = p.messages["pinned"]
    values = messages.request_values(messages.request_cls(), REPLY)
    assert values == {}
    api = tensorwire.get_service_spec(EverySvc).apis["pinned"]
    assert Decoder(api).decode_values(values) == {"first": 0, "second": "", "third": "",
                                                  "fourth": 0.0}


def test_unknown_enum_number_is_an_invalid_argument_at_its_field():
    p = proto()
    messages = p.messages["echo"]
    msg = messages.request({"value": {"s": "x"}})
    msg.value.color = 9
    with pytest.raises(tensorwire.errors.InvalidArgument) as info:
        messages.request_values(msg, REPLY)
    assert info.value.detail[0]["loc"] == ["value", "color"]


def test_streamed_inputs_are_client_streaming_or_bidirectional_rpcs():
    """One element a request message, in the parameter's field; the output decides
    whether the rpc streams back too."""
    from tests.support.stream_services import Streams

    proto = ServiceProto(tensorwire.get_service_spec(Streams))
    methods = {m.name: m for m in proto.file_proto.service[0].method}
    assert (methods["Running"].client_streaming, methods["Running"].server_streaming) \
        == (True, True)
    assert (methods["Total"].client_streaming, methods["Total"].server_streaming) \
        == (True, False)
    text = proto.proto_text()
    assert "rpc Total(stream TotalRequest) returns (TotalResponse);" in text
    assert "rpc Running(stream RunningRequest) returns (stream RunningResponse);" in text
    request = proto.messages["total"].request_cls
    assert [f.name for f in request.DESCRIPTOR.fields] == ["frames"]
    assert request.DESCRIPTOR.fields[0].message_type.full_name == "tensorwire.v1.Tensor"


def test_proto_text_is_deterministic_and_matches_the_golden_file():
    spec = tensorwire.get_service_spec(ReviewAnalyzer)
    text = ServiceProto(spec).proto_text()
    assert text == ServiceProto(spec).proto_text()
    golden = (GOLDEN / "review_analyzer.proto").read_text()
    assert text == golden, "regenerate: tensorwire proto examples.models:ReviewAnalyzer"


def test_cli_proto_output_compiles_with_protoc(tmp_path: Path):
    out = subprocess.run([sys.executable, "-m", "tensorwire", "proto",
                          "examples.models:ReviewAnalyzer"], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[3])
    pkg = tmp_path / "review_analyzer"
    pkg.mkdir()
    (pkg / "review_analyzer.proto").write_text(out.stdout)
    proto_root = str(Path(tensorwire.v1.__file__).parents[2])
    rc = protoc(f"-I{tmp_path}", f"-I{proto_root}", f"--python_out={tmp_path}",
                "review_analyzer/review_analyzer.proto")
    assert rc == 0
    assert (pkg / "review_analyzer_pb2.py").exists()


def test_field_descriptions_become_comments():
    text = ServiceProto(tensorwire.get_service_spec(ReviewAnalyzer)).proto_text()
    assert "// The review text." in text
    assert "// Score one review" in text


def test_types_proto_matches_its_descriptor_set(tmp_path: Path):
    """types.binpb is what protoc makes of types.proto (run `make proto` after edits)."""
    root = Path(tensorwire.v1.__file__).parents[2]
    out = tmp_path / "types.binpb"
    rc = protoc(f"-I{root}", f"--descriptor_set_out={out}", "tensorwire/v1/types.proto")
    assert rc == 0
    assert out.read_bytes() == (Path(tensorwire.v1.__file__).parent / "types.binpb").read_bytes()


def test_field_metadata_in_annotated_keeps_constraints():
    @tensorwire.service
    class C:
        @tensorwire.api
        def m(self, x: t.Annotated[int, Field(ge=3), FieldNumber(4)] = 5) -> int:
            return x

    api = tensorwire.get_service_spec(C).apis["m"]
    assert api.fields[0].number == 4
    with pytest.raises(tensorwire.errors.InvalidArgument):
        Decoder(api).decode_json(b'{"x": 1}')


def _options_of(service: type) -> dict[str, str]:
    fp = ServiceProto(tensorwire.get_service_spec(service)).file_proto
    return {name: getattr(fp.options, name)
            for name in ("go_package", "java_package", "csharp_namespace")}


def test_file_options_are_derived_from_the_proto_package():
    assert _options_of(ReviewAnalyzer) == {
        "go_package": "review_analyzer;reviewanalyzerpb",
        "java_package": "review_analyzer",
        "csharp_namespace": "ReviewAnalyzer",
    }

    @tensorwire.service(name="Gen", proto_package="acme.text_gen.v1")
    class Gen:
        @tensorwire.api
        def m(self, x: int) -> int:
            return x

    assert _options_of(Gen) == {"go_package": "acme/text_gen/v1;textgenv1",
                                "java_package": "acme.text_gen.v1",
                                "csharp_namespace": "Acme.TextGen.V1"}


def test_file_options_given_to_service_win_and_are_printed():
    @tensorwire.service(name="Gen", proto_package="acme.gen",
                        go_package="example.com/acme/gen;genpb",
                        java_package="com.example.acme.gen")
    class Gen:
        @tensorwire.api
        def m(self, x: int) -> int:
            return x

    assert _options_of(Gen) == {"go_package": "example.com/acme/gen;genpb",
                                "java_package": "com.example.acme.gen",
                                "csharp_namespace": "Acme.Gen"}
    text = ServiceProto(tensorwire.get_service_spec(Gen)).proto_text()
    assert 'option go_package = "example.com/acme/gen;genpb";' in text
    assert 'option csharp_namespace = "Acme.Gen";' in text
    assert tensorwire.get_service_spec(Gen).config == {}  # options, not free-form config


def test_a_file_option_that_cannot_be_printed_is_a_type_error():
    with pytest.raises(TypeError, match="go_package"):
        @tensorwire.service(go_package='a"b')
        class Bad:
            @tensorwire.api
            def m(self, x: int) -> int:
                return x
