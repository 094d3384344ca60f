"""The non-finite rule's parts (`tensorwire.codecs.finite`): opt-in detection, the walk
over values pydantic's own checks do not reach, JSON output and protobuf doubles."""

from __future__ import annotations

import enum
import math
import typing as t

import pytest
from pydantic import AllowInfNan, BaseModel, ConfigDict, Field

from tensorwire.codecs import codec_for
from tensorwire.codecs.finite import (
    _model_plan,
    allows_nonfinite,
    checked_json,
    find_nonfinite,
    finite,
    loosen,
)
from tensorwire.errors import InternalError
from tensorwire.wire.field_error import FieldError

NAN, INF = math.nan, math.inf


class Inner(BaseModel):
    z: float


class Outer(BaseModel):
    strict: float = 0.0
    loose: float = Field(0.0, allow_inf_nan=True)
    inner: Inner | None = None
    items: list[float] = []
    extra: dict = {}
    named: float = Field(0.0, alias="Named")


class Lenient(BaseModel):
    model_config = ConfigDict(allow_inf_nan=True)
    value: float = 0.0
    values: list[float] = []
    inner: Inner | None = None


class Written(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="strings")
    loose: float = Field(0.0, allow_inf_nan=True)


def test_opt_in_markers():
    assert allows_nonfinite((AllowInfNan(),))
    assert not allows_nonfinite((AllowInfNan(False),))
    assert allows_nonfinite((Field(allow_inf_nan=True),))
    assert not allows_nonfinite((Field(ge=0),))
    assert not allows_nonfinite(())


@pytest.mark.parametrize("value,path", [
    (1.5, None),
    (NAN, []),
    ([1.0, "NaN", INF], [2]),
    ({"a": {"b": [0.0, -INF]}}, ["a", "b", 1]),
    (("x", 1, True, None, b"\x00"), None),
    (Outer(strict=NAN), ["strict"]),
    (Outer(loose=NAN), None),
    (Outer(inner=Inner(z=INF)), ["inner", "z"]),
    (Outer(items=[1.0, NAN]), ["items", 1]),
    (Outer(extra={"k": [NAN]}), ["extra", "k", 0]),
    (Outer.model_validate({"Named": NAN}), ["Named"]),  # the loc a client knows
    (Lenient(value=NAN, values=[INF]), None),
    (Lenient(inner=Inner(z=NAN)), ["inner", "z"]),  # a model's opt-in stops at models
    ([Outer(), Outer(strict=INF)], [1, "strict"]),
])
def test_find_nonfinite(value, path):
    assert find_nonfinite(value) == path


def test_writing_json_needs_the_model_to_write_strings():
    # pydantic's default writes an opted-in NaN as null: refused where JSON is written
    assert find_nonfinite(Outer(loose=NAN), writing_json=True) == ["loose"]
    assert find_nonfinite(Written(loose=NAN), writing_json=True) is None
    assert find_nonfinite(Written(loose=NAN)) is None


def test_checked_json():
    assert checked_json(b'{"a":1.0}') == b'{"a":1.0}'
    assert checked_json(b'["NaN","Infinity"]') == b'["NaN","Infinity"]'  # just words
    for bad in (b"NaN", b"[1.0,Infinity]", b'{"a":-Infinity}'):
        with pytest.raises(InternalError, match="allow_inf_nan=True"):
            checked_json(bad)


@pytest.mark.parametrize("annotation,value,json", [
    (float, 1.5, b"1.5"),
    (t.Annotated[float, AllowInfNan()], NAN, b'"NaN"'),
    (t.Annotated[float, AllowInfNan()], -INF, b'"-Infinity"'),
    (list[t.Annotated[float, AllowInfNan()]], [1.0, INF], b'[1.0,"Infinity"]'),
])
def test_codec_json_of_allowed_values(annotation, value, json):
    assert codec_for(annotation).dump_json(value) == json


@pytest.mark.parametrize("annotation,value", [
    (float, NAN), (list[float], [1.0, INF]), (dict[str, float], {"a": -INF}),
    (t.Any, {"a": [NAN]}), (Outer, Outer(inner=Inner(z=NAN))), (Outer, Outer(loose=INF)),
])
def test_codec_json_refuses_the_rest(annotation, value):
    with pytest.raises(InternalError):
        codec_for(annotation).dump_json(value)


def test_doubles():
    assert finite(1.5, False) == 1.5
    assert math.isnan(finite(NAN, True))
    with pytest.raises(FieldError, match="allow_inf_nan"):
        finite(-INF, False)
    assert codec_for(t.Annotated[float, AllowInfNan()]).proto.to_proto(INF) == INF
    with pytest.raises(FieldError):
        codec_for(float).proto.to_proto(NAN)


def test_loosen_opts_in_the_floats_of_a_lenient_model():
    assert loosen(float) == t.Annotated[float, AllowInfNan()]
    assert loosen(list[float]) == list[t.Annotated[float, AllowInfNan()]]
    assert loosen(dict[str, float | None]) == dict[str, t.Annotated[float, AllowInfNan()] | None]
    assert loosen(list[str]) == list[str]
    assert loosen(Inner) is Inner
    fields = {f.name: f.codec for f in codec_for(Lenient).fields}
    assert math.isnan(fields["value"].proto.to_proto(NAN))
    assert fields["values"].item.proto.to_proto(INF) == INF


class StringsButStrict(BaseModel):
    """Writes NaN as "NaN" by its config, yet does not opt the field in."""

    model_config = ConfigDict(ser_json_inf_nan="strings")
    value: float = 0.0


class Quiet(BaseModel):
    note: str | None = None
    value: float = 0.0


@pytest.mark.parametrize("value", [
    Quiet(value=NAN),  # pydantic writes null: looked at because null appears
    Quiet(note=None, value=INF),
    StringsButStrict(value=NAN),  # written as "NaN": looked at because the word appears
    [Quiet(), Quiet(value=-INF)],
])
def test_model_json_that_could_hide_a_nonfinite_value_is_walked(value):
    codec = codec_for(type(value) if not isinstance(value, list) else list[Quiet])
    with pytest.raises(InternalError, match="NaN or infinity at"):
        codec.dump_json(value)


def test_only_fields_that_can_hold_floats_are_walked():
    class Shapes(BaseModel):
        name: str
        count: int
        tags: list[str]
        scores: list[float]
        meta: dict
        inner: Inner | None = None
        ratio: float | None = None

    _, fields = _model_plan(Shapes)
    assert [name for name, _, _ in fields] == ["scores", "meta", "inner", "ratio"]


class _Scored(BaseModel):
    label: str
    score: float
    note: str | None = None


@pytest.mark.parametrize(("annotation", "value", "answer"), [
    (float, 1.5, b"1.5"),
    (int, 3, b"3"),
    (list[float], [1.0, 2.5], b"[1.0,2.5]"),
    (float | None, None, b"null"),
    (_Scored, _Scored(label="NaN-free", score=0.5), None),
    (_Scored, {"label": "as a dict", "score": 2}, None),  # validated into the model
    (dict[str, t.Any], {"text": "Infinity and null, in strings"}, None),
])
def test_the_bound_json_dumper_writes_what_dump_json_writes(annotation, value, answer):
    codec = codec_for(annotation)
    expected = codec.dump_json(codec.output_value(value))
    assert codec.json_dumper()(value) == expected
    if answer is not None:
        assert expected == answer


@pytest.mark.parametrize(("annotation", "value"), [
    (float, math.nan),
    (list[float], [1.0, math.inf]),
    (_Scored, _Scored(label="x", score=math.nan)),  # the model writes it as null
    (_Scored, {"label": "x", "score": -math.inf}),
])
def test_the_bound_json_dumper_refuses_nonfinite_outputs(annotation, value):
    with pytest.raises(InternalError):
        codec_for(annotation).json_dumper()(value)


class _Tone(enum.StrEnum):
    LOW = "low"


@pytest.mark.parametrize(("annotation", "value"), [
    (str, "tok "),
    (str, "héllo\nworld"),
    (t.Literal["a", "b"], "a"),
    (t.Annotated[str, Field(max_length=3)], "abc"),
    (_Tone, _Tone.LOW),
    (int, 7),
    (float, 0.25),
    (list[float], [1.0, 2.5]),
    (_Scored, _Scored(label="x", score=0.5)),
    (_Scored, {"label": "as a dict", "score": 2}),
    (dict[str, t.Any], {"k": [1, "NaN as text"]}),
])
def test_the_bound_chunk_encoder_writes_what_encode_chunk_writes(annotation, value):
    http = codec_for(annotation).http
    assert http.chunk_encoder()(value) == http.encode_chunk(value)


@pytest.mark.parametrize(("annotation", "value"), [
    (t.Literal["a", "b"], "c"),  # a str the contract does not allow is still refused
    (float, math.nan),
])
def test_the_bound_chunk_encoder_refuses_what_encode_chunk_refuses(annotation, value):
    http = codec_for(annotation).http
    with pytest.raises(Exception) as general:
        http.encode_chunk(value)
    with pytest.raises(general.type):
        http.chunk_encoder()(value)
