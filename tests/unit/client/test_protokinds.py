"""Descriptor-driven encoding: the client fills requests the server's own decoder reads,
and reads back the responses the server's own encoder writes."""

from __future__ import annotations

import datetime as dt
import enum
import typing as t

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as FDP
from pydantic import BaseModel, Field

import tensorwire
from tensorwire import v1
from tensorwire.client.filedata import ClientFiles
from tensorwire.client.grpc_transport import Output, encode_request, grpc_api
from tensorwire.client.kinds import field_kind
from tensorwire.codecs import REPLY
from tensorwire.contract.decoding import Decoder
from tensorwire.errors import InvalidArgument
from tensorwire.protobuf.descriptors import service_proto

UTC = dt.UTC


class Mood(enum.Enum):
    HAPPY = "happy"
    GRUMPY = "grumpy"


class Pet(BaseModel):
    name: str = Field(min_length=1)
    born: dt.datetime | None = None
    toys: list[str] = Field(default_factory=list)


class Out(BaseModel):
    pets: list[Pet]
    mood: Mood
    scores: dict[str, float]
    blob: bytes
    meta: dict[str, t.Any]
    span: dt.timedelta
    any: t.Any = None
    missing: int | None = None


@tensorwire.service
class Zoo:
    @tensorwire.api
    def visit(self, pets: list[Pet], mood: Mood = Mood.HAPPY, when: dt.datetime | None = None,
              span: dt.timedelta = dt.timedelta(0), counts: dict[str, int] | None = None,
              meta: dict[str, t.Any] | None = None, note: str | None = None,
              kind: t.Literal["cat", "dog"] = "cat", blob: bytes = b"",
              any: t.Any = None, ratio: float = 0.5, flag: bool = False) -> Out:
        raise NotImplementedError

    @tensorwire.api
    def plain(self, n: int) -> list[int]:
        raise NotImplementedError


PROTO = service_proto(tensorwire.get_service_spec(Zoo))
FILES = ClientFiles()


SERVICE = PROTO.pool.FindServiceByName(tensorwire.get_service_spec(Zoo).grpc_service_name)
APIS = {api.name: api for api in (grpc_api(SERVICE, m) for m in SERVICE.methods)}


def encode(api: str, values: dict[str, t.Any]):
    return encode_request(APIS[api], values, FILES)


def server_reads(api: str, msg) -> dict[str, t.Any]:
    messages = PROTO.messages[api]
    wire = messages.request_cls.FromString(msg.SerializeToString())
    return Decoder(messages.api).decode_values(messages.request_values(wire, REPLY))


WHEN = dt.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=UTC)


def test_every_standard_type_reaches_the_server_as_sent():
    msg = encode("visit", {
        "pets": [{"name": "rex", "born": WHEN, "toys": ["ball"]}, Pet(name="tom")],
        "mood": Mood.GRUMPY, "when": "2024-02-29T23:59:58.123456Z", "span": 1.5,
        "counts": {"a": 1, "b": "2"}, "meta": {"deep": [1, {"x": None}]}, "note": "n",
        "kind": "dog", "blob": b"\x00\xff", "any": [1, "two"], "ratio": 1, "flag": "yes"})
    got = server_reads("visit", msg)
    assert got["pets"] == [Pet(name="rex", born=WHEN, toys=["ball"]), Pet(name="tom")]
    assert got["mood"] is Mood.GRUMPY
    assert got["when"] == WHEN
    assert got["span"] == dt.timedelta(seconds=1.5)
    assert got["counts"] == {"a": 1, "b": 2}
    assert got["meta"] == {"deep": [1, {"x": None}]}
    assert type(got["meta"]["deep"][0]) is int  # JSON text, not a double in a Value
    assert (got["note"], got["kind"], got["blob"]) == ("n", "dog", b"\x00\xff")
    assert got["any"] == [1, "two"] and got["ratio"] == 1.0 and got["flag"] is True


def test_enums_take_values_members_and_names_case_insensitively():
    for value in ("grumpy", "GRUMPY", Mood.GRUMPY):
        assert server_reads("visit", encode("visit", {"pets": [], "mood": value}))[
            "mood"] is Mood.GRUMPY


def test_encoding_errors_name_every_bad_field_like_the_server():
    with pytest.raises(InvalidArgument) as info:
        encode("visit", {"pets": [{"name": "a"}, {"name": 5, "toys": "x"}], "mood": "sad",
                         "ratio": "high", "counts": {"a": "many"}, "when": "noon"})
    locs = [v["loc"] for v in info.value.detail]
    assert locs == [["pets", 1, "name"], ["pets", 1, "toys"], ["mood"], ["when"],
                    ["counts", "a"], ["ratio"]]  # declaration order, whatever the call's
    types = {tuple(v["loc"]): v["type"] for v in info.value.detail}
    assert types[("ratio",)] == "float_parsing"  # pydantic's own words, as over HTTP
    assert types[("pets", 1, "toys")] == "list_type"
    assert info.value.message.startswith("pets.1.name: ") and "(and 5 more)" in \
        info.value.message


def test_int64_range_is_checked_before_protobuf_refuses_it():
    with pytest.raises(InvalidArgument) as info:
        encode("plain", {"n": 2 ** 63})
    assert info.value.detail[0]["loc"] == ["n"]
    assert info.value.detail[0]["type"] == "int_out_of_range"


def test_responses_read_back_as_plain_python():
    messages = PROTO.messages["visit"]
    value = Out(pets=[Pet(name="a", born=WHEN)], mood=Mood.HAPPY, scores={"x": 0.5},
                blob=b"\x01", meta={"k": [1, "v"]}, span=dt.timedelta(minutes=2),
                any={"z": True})
    reply = messages.response(value)
    out = Output(reply.DESCRIPTOR).decode(
        messages.response_cls.FromString(reply.SerializeToString()), FILES)
    assert out == {
        "pets": [{"name": "a", "born": WHEN, "toys": []}], "mood": "happy",
        "scores": {"x": 0.5}, "blob": b"\x01", "meta": {"k": [1, "v"]},
        "span": dt.timedelta(minutes=2), "any": {"z": True}, "missing": None}
    assert type(out["meta"]["k"][0]) is int  # as over HTTP, not 1.0
    plain = PROTO.messages["plain"]
    assert Output(plain.response_cls.DESCRIPTOR).decode(plain.response([3, 4]), FILES) == [3, 4]


def test_summaries_use_the_names_the_http_contract_gives():
    apis = {name: api.info() for name, api in APIS.items()}
    assert apis["visit"].inputs == {
        "pets": "list[Pet]", "mood": "'happy' | 'grumpy'", "when": "datetime",
        "span": "timedelta", "counts": "dict[str, int]", "meta": "dict", "note": "str",
        "kind": "'cat' | 'dog'", "blob": "bytes", "any": "any", "ratio": "float",
        "flag": "bool"}
    assert apis["visit"].output == (
        "{pets: list[Pet], mood: 'happy' | 'grumpy', scores: dict[str, float], blob: bytes, "
        "meta: dict, span: timedelta, any: any, missing: int}")
    assert apis["plain"].output == "list[int]"


def test_json_text_fields_carry_any_json_and_keep_ints():
    messages = PROTO.messages["visit"]
    msg = encode("visit", {"pets": [], "any": {"n": 2 ** 53 + 1, "f": 2.0, "l": [1, 2.5]}})
    assert msg.any == "{\"n\":9007199254740993,\"f\":2.0,\"l\":[1,2.5]}"  # beyond a double
    got = server_reads("visit", msg)["any"]
    assert got == {"n": 2 ** 53 + 1, "f": 2.0, "l": [1, 2.5]}
    assert [type(got["n"]), type(got["f"]), type(got["l"][0])] == [int, float, int]
    bad = messages.request_cls(pets=[], any="{not json")
    with pytest.raises(InvalidArgument) as info:
        server_reads("visit", bad)
    assert info.value.detail[0]["loc"] == ["any"]
    assert info.value.detail[0]["type"] == "json_invalid"


# ------------------------------------------------------------ hand-built descriptors


def _holder_pool():
    """A message using the fixed vocabulary and a oneof union, as codecs will emit."""
    pool = descriptor_pool.DescriptorPool()
    v1.add_to_pool(pool)
    fp = descriptor_pb2.FileDescriptorProto(name="holder.proto", package="h", syntax="proto3",
                                            dependency=[v1.PROTO_NAME])
    for name, tag in (("Cat", "CAT"), ("Dog", "DOG")):
        enum_proto = fp.enum_type.add(name=f"{name}Kind")
        enum_proto.value.add(name=f"{name.upper()}_KIND_UNSPECIFIED", number=0)
        enum_proto.value.add(name=f"{name.upper()}_KIND_{tag}", number=1)
        m = fp.message_type.add(name=name)
        m.field.add(name="kind", number=1, type=FDP.TYPE_ENUM, type_name=f".h.{name}Kind",
                    label=FDP.LABEL_OPTIONAL, proto3_optional=True, oneof_index=0)
        m.oneof_decl.add(name="_kind")
        m.field.add(name="lives" if name == "Cat" else "bark", number=2,
                    type=FDP.TYPE_INT64 if name == "Cat" else FDP.TYPE_STRING,
                    label=FDP.LABEL_OPTIONAL, proto3_optional=True, oneof_index=1)
        m.oneof_decl.add(name="_lives" if name == "Cat" else "_bark")
    u = fp.message_type.add(name="CatOrDog")
    u.oneof_decl.add(name="choice")
    u.field.add(name="cat", number=1, type=FDP.TYPE_MESSAGE, type_name=".h.Cat",
                label=FDP.LABEL_OPTIONAL, oneof_index=0)
    u.field.add(name="dog", number=2, type=FDP.TYPE_MESSAGE, type_name=".h.Dog",
                label=FDP.LABEL_OPTIONAL, oneof_index=0)
    h = fp.message_type.add(name="Holder")
    fields = [("t", ".tensorwire.v1.Tensor", FDP.LABEL_OPTIONAL),
              ("ts", ".tensorwire.v1.Tensor", FDP.LABEL_REPEATED),
              ("f", ".tensorwire.v1.File", FDP.LABEL_OPTIONAL),
              ("df", ".tensorwire.v1.DataFrame", FDP.LABEL_OPTIONAL),
              ("pet", ".h.CatOrDog", FDP.LABEL_OPTIONAL)]
    for i, (name, type_name, label) in enumerate(fields, start=1):
        h.field.add(name=name, number=i, type=FDP.TYPE_MESSAGE, type_name=type_name,
                    label=label)
    pool.Add(fp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("h.Holder"))


Holder = _holder_pool()


def roundtrip(name: str, value: t.Any, files: ClientFiles = FILES) -> t.Any:
    msg = Holder()
    kind = field_kind(Holder.DESCRIPTOR.fields_by_name[name])
    kind.write(msg, name, value, (name,), files)
    wire = Holder.FromString(msg.SerializeToString())
    return kind.read(wire, name, files), wire


def test_tensors_travel_as_raw_little_endian_bytes():
    import numpy as np

    for array in (np.arange(12, dtype=np.float32).reshape(3, 4),
                  np.array([[1, 2], [3, 4]], dtype=">i8"),  # big-endian in, native out
                  np.array([True, False]), np.zeros((0, 3), np.float16),
                  np.array(7.5), np.array([["a", "bé"], ["c", ""]]),
                  np.array([1 + 2j], np.complex64), np.arange(6)[::2]):
        out, wire = roundtrip("t", array)
        assert out.dtype == array.dtype.newbyteorder("=") or out.dtype.kind == "U"
        assert out.shape == array.shape and np.array_equal(out, array)
        assert out.flags.writeable
    _, wire = roundtrip("t", np.array([1.0, 2.0], np.float32))
    assert wire.t.dtype == v1.DType.values_by_name["FLOAT32"].number
    assert list(wire.t.shape) == [2] and wire.t.data == np.float32([1, 2]).tobytes()
    outs, _ = roundtrip("ts", [np.ones(2), [[1, 2]]])
    assert [o.tolist() for o in outs] == [[1.0, 1.0], [[1, 2]]]


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    out, _ = roundtrip("t", torch.arange(4, dtype=torch.int32).reshape(2, 2))
    assert out.dtype.name == "int32" and out.tolist() == [[0, 1], [2, 3]]


def test_received_tensors_are_checked_before_use():
    from tensorwire.client.tensors import tensor_from_proto
    from tensorwire.errors import ClientError

    lying = v1.Tensor(dtype=v1.DType.values_by_name["FLOAT32"].number, shape=[1000, 1000],
                      data=b"\x00" * 8)
    with pytest.raises(ClientError, match=r"float32 needs 4000000 bytes, data has 8"):
        tensor_from_proto(lying)
    with pytest.raises(ClientError, match="dtype is not set"):
        tensor_from_proto(v1.Tensor(dtype=0, shape=[1], data=b"\x00"))
    with pytest.raises(ClientError, match="unknown dtype number 999"):
        tensor_from_proto(v1.Tensor(dtype=999, shape=[1], data=b"\x00"))
    with pytest.raises(ClientError, match="negative"):
        tensor_from_proto(v1.Tensor(dtype=2, shape=[-1], data=b""))


def test_object_arrays_are_refused():
    import numpy as np

    with pytest.raises(InvalidArgument) as info:
        roundtrip("t", np.array([object(), 1], dtype=object))
    assert info.value.detail[0]["loc"] == ["t"]


def test_files_travel_as_file_messages(tmp_path):
    src = tmp_path / "notes.txt"
    src.write_text("hello")
    files = ClientFiles(tmp_path / "out")
    out, wire = roundtrip("f", src, files)
    assert (wire.f.content, wire.f.content_type, wire.f.filename) == (
        b"hello", "text/plain", "notes.txt")
    assert out.read_bytes() == b"hello" and out.name == "notes.txt"
    assert out.is_relative_to(tmp_path / "out")
    out, wire = roundtrip("f", ("x.png", b"\x89PNG", "image/png"), files)
    assert (wire.f.filename, wire.f.content_type) == ("x.png", "image/png")
    msg = Holder()
    msg.f.content, msg.f.filename = b"evil", "../../etc/passwd"
    saved = field_kind(Holder.DESCRIPTOR.fields_by_name["f"]).read(msg, "f", files)
    assert saved.name == "passwd" and saved.is_relative_to(tmp_path / "out")


def test_images_travel_in_their_format(tmp_path):
    image_module = pytest.importorskip("PIL.Image")
    image = image_module.new("RGB", (4, 3), (255, 0, 0))
    out, wire = roundtrip("f", image, ClientFiles(tmp_path))
    assert wire.f.content_type == "image/png" and wire.f.content.startswith(b"\x89PNG")
    from tensorwire.client.api import adapt_output

    opened = adapt_output(out, image_module.Image)
    assert opened.size == (4, 3) and opened.getpixel((0, 0)) == (255, 0, 0)


def test_dataframes_travel_as_typed_columns():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5], "c": ["x", "y", "z"]})
    out, wire = roundtrip("df", frame)
    assert list(wire.df.columns) == ["a", "b", "c"] and not wire.df.HasField("index")
    pd.testing.assert_frame_equal(out, frame, check_dtype=False)
    indexed = frame.set_index(pd.Index([10, 20, 30]))
    out, wire = roundtrip("df", indexed)
    assert wire.df.HasField("index") and list(out.index) == [10, 20, 30]


def test_a_union_picks_its_variant_by_the_tag():
    out, wire = roundtrip("pet", {"kind": "dog", "bark": "woof"})
    assert wire.pet.WhichOneof("choice") == "dog"
    assert out == {"kind": "dog", "bark": "woof"}
    out, wire = roundtrip("pet", {"kind": "cat", "lives": 9})
    assert wire.pet.WhichOneof("choice") == "cat" and out == {"kind": "cat", "lives": 9}
    with pytest.raises(InvalidArgument) as info:
        roundtrip("pet", {"kind": "cow"})
    assert info.value.detail[0]["loc"] == ["pet"]


@tensorwire.service
class Roots:
    @tensorwire.api
    def shout(self, text: str, /) -> str:
        raise NotImplementedError

    @tensorwire.api
    def named(self, text: str) -> str:
        raise NotImplementedError


def test_root_inputs_are_marked_in_the_contract_and_read_back():
    proto = service_proto(tensorwire.get_service_spec(Roots))
    (svc,) = proto.file_proto.service
    marks = {m.name: v1.is_root_input(m.options) for m in svc.method}
    assert marks == {"Shout": True, "Named": False}
    service = proto.pool.FindServiceByName(tensorwire.get_service_spec(Roots).grpc_service_name)
    apis = {api.name: api for api in (grpc_api(service, m) for m in service.methods)}
    assert apis["shout"].root is True
    assert apis["named"].root is False  # one keyword input, not a root input
    with pytest.raises(TypeError, match="root input 'text'"):
        apis["shout"].bind((), {"text": "x"})
    # A contract without the option (an older server) cannot tell: a single field stays
    # ambiguous, accepted positionally and by name.
    old = {api.name: api for api in (grpc_api(service, m, False) for m in service.methods)}
    assert old["named"].root is None
    assert old["named"].bind((), {"text": "x"}) == old["named"].bind(("x",), {})
