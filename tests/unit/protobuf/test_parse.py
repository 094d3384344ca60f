"""Reading .proto source back: what a published contract declares, without protoc."""

from __future__ import annotations

from pathlib import Path

import pytest

import tensorwire
from examples.models import ReviewAnalyzer
from tensorwire.protobuf.descriptors import ServiceProto
from tensorwire.protobuf.parse import MAX_ENUM, MAX_FIELD, ProtoSyntaxError, parse_proto

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def test_the_golden_contract_reads_back_with_every_number():
    parsed = parse_proto((GOLDEN / "review_analyzer.proto").read_text())
    assert parsed.package == "review_analyzer"
    review = parsed.messages["Review"]
    assert [(f.name, f.number, f.label, f.type) for f in review.fields] == [
        ("text", 1, "optional", "string"), ("stars", 2, "optional", "int64"),
        ("tags", 3, "repeated", "string"), ("posted", 4, "", "google.protobuf.Timestamp")]
    tags = parsed.messages["AnalyzeResponse"].fields[3]
    assert (tags.name, tags.number, tags.type) == ("tags", 4, "map<string, int64>")
    assert parsed.enums["SearchMode"].values == {
        "SEARCH_MODE_UNSPECIFIED": 0, "SEARCH_MODE_EXACT": 1, "SEARCH_MODE_FUZZY": 2}
    rpcs = parsed.services["ReviewAnalyzer"].rpcs
    assert list(rpcs) == ["Analyze", "Search", "Shout", "Stats", "Fail"]
    assert (rpcs["Shout"].input_type, rpcs["Shout"].output_type) == ("ShoutRequest",
                                                                      "ShoutResponse")


def test_what_the_generator_writes_is_what_the_parser_reads():
    proto = ServiceProto(tensorwire.get_service_spec(ReviewAnalyzer))
    parsed = parse_proto(proto.proto_text())
    for msg in proto.file_proto.message_type:
        assert {f.name: f.number for f in parsed.messages[msg.name].fields} == {
            f.name: f.number for f in msg.field}
    for enum in proto.file_proto.enum_type:
        assert parsed.enums[enum.name].values == {v.name: v.number for v in enum.value}


HAND_WRITTEN = """
// A hand-edited file: comments, options, nested types, oneofs, extensions.
syntax = "proto3";
package acme.v2;
import public "google/protobuf/timestamp.proto";
option go_package = "acme.dev/gen;acmev2";
option (my.file_opt) = { a: 1 b: { c: "}" } };

/* a block comment with message Fake { int32 x = 99; } inside */
message Outer {
  option deprecated = true;
  message Inner { int32 y = 0x10; }
  enum Kind { KIND_UNSPECIFIED = 0; KIND_NEG = -1 [deprecated = true]; }
  Inner inner = 1 [json_name = "in", deprecated = true];
  oneof choice {
    string a = 2;
    Inner b = 3;
  }
  map<string, Inner> byname = 4;
  reserved 5, 8 to 10, 100 to max;
  reserved "gone", 'old';
  extensions 1000 to 2000;
  extend Other { int32 ext = 1001; }
}
enum Top { option allow_alias = true; TOP_UNSPECIFIED = 0; reserved 3 to max; reserved X; }
service Svc {
  option deprecated = true;
  rpc Get(Outer) returns (stream .acme.v2.Outer.Inner) { option deprecated = true; };
  rpc Put(stream Outer) returns (Outer);
}
extend google.protobuf.MethodOptions { bool flag = 50000; }
"""


def test_a_hand_written_file_reads_with_options_nesting_and_reserved():
    parsed = parse_proto(HAND_WRITTEN)
    assert parsed.package == "acme.v2"
    assert "Fake" not in parsed.messages  # inside a comment
    outer = parsed.messages["Outer"]
    assert [(f.name, f.number, f.oneof) for f in outer.fields] == [
        ("inner", 1, None), ("a", 2, "choice"), ("b", 3, "choice"), ("byname", 4, None)]
    assert outer.reserved.ranges == [(5, 5), (8, 10), (100, MAX_FIELD)]
    assert outer.reserved.names == ["gone", "old"]
    assert parsed.messages["Outer.Inner"].fields[0].number == 16
    assert parsed.enums["Outer.Kind"].values == {"KIND_UNSPECIFIED": 0, "KIND_NEG": -1}
    assert parsed.enums["Top"].reserved.ranges == [(3, MAX_ENUM)]
    assert parsed.enums["Top"].reserved.names == ["X"]
    get, put = parsed.services["Svc"].rpcs.values()
    assert (get.server_streaming, get.output_type) == (True, ".acme.v2.Outer.Inner")
    assert (put.client_streaming, put.server_streaming) == (True, False)


@pytest.mark.parametrize(("text", "line"), [
    ("syntax = \"proto3\";\nmessage A {\n  int32 x = ;\n}\n", 3),
    ("message A {\n  int32 x = 1\n}\n", 3),
    ("message A { int32 x = 1; ", None),
    ("message A { int32 x = 1; }\n$", 2),
])
def test_a_broken_file_is_an_error_naming_the_line(text, line):
    with pytest.raises(ProtoSyntaxError) as info:
        parse_proto(text)
    if line is None:
        assert "end of file" in str(info.value)
    else:
        assert f"line {line}" in str(info.value)
