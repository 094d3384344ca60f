"""The standard codecs on the JSON side: what a JSON body accepts and refuses, and where.

Each row declares one parameter `x` of an API and sends `{"x": <value>}` through the
API's own `Decoder.decode_json` (from bytes, as the HTTP transport does). Good values come back
as the Python value the method receives; bad ones are an InvalidArgument whose first
violation has the expected location and error type.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import typing as t
from dataclasses import dataclass
from decimal import Decimal

import pytest
from annotated_types import (
    Ge,
    Gt,
    Interval,
    Le,
    Len,
    Lt,
    MaxLen,
    MinLen,
    MultipleOf,
    Predicate,
)
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.contract.decoding import Decoder
from tensorwire.errors import InvalidArgument

_ABSENT = object()


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Inner(BaseModel):
    n: int
    tags: list[t.Annotated[str, MinLen(1)]] = []


class Outer(BaseModel):
    name: str
    inner: Inner
    more: list[Inner] = []


def api_for(annotation: t.Any, default: t.Any = _ABSENT) -> Decoder:
    """The decoder of `def method(self, x: annotation [= default]) -> int`."""
    if default is _ABSENT:
        def method(self, x):  # type: ignore[no-untyped-def]
            return 1
    else:
        def method(self, x=default):  # type: ignore[no-untyped-def]
            return 1
    method.__annotations__ = {"x": annotation, "return": int}
    svc = tensorwire.service(type("Svc", (), {"method": tensorwire.api(method)}))
    return Decoder(tensorwire.get_service_spec(svc).apis["method"])


def decode(annotation: t.Any, body: bytes, default: t.Any = _ABSENT) -> dict[str, t.Any]:
    return api_for(annotation, default).decode_json(body)


def send(value: t.Any) -> bytes:
    return json.dumps({"x": value}).encode()


@dataclass
class Row:
    id: str
    annotation: t.Any
    #: (JSON value sent, Python value received)
    good: list[tuple[t.Any, t.Any]]
    #: (JSON value sent, loc of the first violation, its type)
    bad: list[tuple[t.Any, list[t.Any], str]]


UTC = dt.UTC

ROWS = [
    # ------------------------------------------------------------- scalars
    Row("str", str, [("abc", "abc"), ("", "")],
        [(5, ["x"], "string_type"), (None, ["x"], "string_type")]),
    Row("int", int, [(5, 5), (-3, -3), (2.0, 2), ("7", 7)],
        [(5.5, ["x"], "int_from_float"), ("abc", ["x"], "int_parsing"),
         (None, ["x"], "int_type"), ([1], ["x"], "int_type")]),
    Row("float", float, [(1.5, 1.5), (1, 1.0), ("2.5", 2.5)],
        [("x", ["x"], "float_parsing"), (None, ["x"], "float_type")]),
    Row("bool", bool, [(True, True), (False, False), ("true", True), (0, False)],
        [("maybe", ["x"], "bool_parsing"), (2, ["x"], "bool_parsing"),
         (None, ["x"], "bool_type")]),
    Row("bytes-base64", bytes, [("aGk=", b"hi"), ("", b"")],
        [("!!!", ["x"], "bytes_invalid_encoding"), (5, ["x"], "bytes_type")]),
    # ------------------------------------------------------------- containers
    Row("list", list[int], [([1, 2], [1, 2]), ([], [])],
        [([1, "a"], ["x", 1], "int_parsing"), ("12", ["x"], "list_type"),
         ({"a": 1}, ["x"], "list_type")]),
    Row("dict", dict[str, int], [({"a": 1}, {"a": 1}), ({}, {})],
        [({"a": "z"}, ["x", "a"], "int_parsing"), ([1], ["x"], "dict_type")]),
    Row("dict-int-keys", dict[int, str], [({"1": "a"}, {1: "a"})],
        [({"one": "a"}, ["x", "one", "[key]"], "int_parsing")]),
    Row("any", t.Any, [(1, 1), ("s", "s"), ([1, {"a": None}], [1, {"a": None}]),
                       (None, None)], []),
    Row("struct", dict[str, t.Any], [({"a": [1, "b"]}, {"a": [1, "b"]})],
        [([1], ["x"], "dict_type")]),
    Row("nested-list", list[list[float]], [([[1, 2], []], [[1.0, 2.0], []])],
        [([[1], ["a"]], ["x", 1, 0], "float_parsing")]),
    # ------------------------------------------------------------- models
    Row("model", Outer,
        [({"name": "a", "inner": {"n": 1}},
          Outer(name="a", inner=Inner(n=1))),
         ({"name": "a", "inner": {"n": "2", "tags": ["t"]}, "more": [{"n": 3}]},
          Outer(name="a", inner=Inner(n=2, tags=["t"]), more=[Inner(n=3)]))],
        [({"name": "a", "inner": {"n": "x"}}, ["x", "inner", "n"], "int_parsing"),
         ({"name": "a", "inner": {}}, ["x", "inner", "n"], "missing"),
         ({"inner": {"n": 1}}, ["x", "name"], "missing"),
         ({"name": "a", "inner": {"n": 1, "tags": ["ok", ""]}},
          ["x", "inner", "tags", 1], "string_too_short"),
         ({"name": "a", "inner": {"n": 1}, "more": [{"n": 1}, {"n": []}]},
          ["x", "more", 1, "n"], "int_type"),
         ("a", ["x"], "model_type")]),
    # ------------------------------------------------------------- choices
    Row("literal-str", t.Literal["a", "b"], [("a", "a"), ("b", "b")],
        [("c", ["x"], "literal_error"), (1, ["x"], "literal_error")]),
    Row("literal-int", t.Literal[1, 2], [(1, 1), (2, 2)],
        [(3, ["x"], "literal_error")]),
    Row("enum", Color, [("red", Color.RED), ("green", Color.GREEN)],
        [("pink", ["x"], "enum"), ("RED", ["x"], "enum")]),
    # ------------------------------------------------------------- time
    Row("datetime", dt.datetime,
        [("2024-01-02T03:04:05Z", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
         ("2024-01-02T03:04:05+02:00",
          dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2)))),
         ("2024-01-02T03:04:05", dt.datetime(2024, 1, 2, 3, 4, 5)),
         (0, dt.datetime(1970, 1, 1, tzinfo=UTC))],
        [("not a date", ["x"], "datetime_from_date_parsing"),
         ("2024-13-01T00:00:00", ["x"], "datetime_from_date_parsing"),
         (None, ["x"], "datetime_type")]),
    Row("date", dt.date, [("2024-02-29", dt.date(2024, 2, 29))],
        [("2023-02-29", ["x"], "date_from_datetime_parsing")]),
    Row("timedelta", dt.timedelta, [("PT1M30S", dt.timedelta(seconds=90)),
                                    (1.5, dt.timedelta(seconds=1.5))],
        [("soon", ["x"], "time_delta_parsing")]),
    # ------------------------------------------------------------- annotated_types
    Row("min-len-str", t.Annotated[str, MinLen(2)], [("ab", "ab")],
        [("a", ["x"], "string_too_short")]),
    Row("max-len-str", t.Annotated[str, MaxLen(3)], [("abc", "abc"), ("", "")],
        [("abcd", ["x"], "string_too_long")]),
    Row("len-list", t.Annotated[list[int], Len(2, 3)], [([1, 2], [1, 2]), ([1, 2, 3], [1, 2, 3])],
        [([1], ["x"], "too_short"), ([1, 2, 3, 4], ["x"], "too_long")]),
    Row("max-len-bytes", t.Annotated[bytes, MaxLen(2)], [("aGk=", b"hi")],
        [("aGkh", ["x"], "bytes_too_long")]),
    Row("ge", t.Annotated[int, Ge(0)], [(0, 0), (5, 5)],
        [(-1, ["x"], "greater_than_equal")]),
    Row("gt", t.Annotated[float, Gt(0)], [(0.1, 0.1)],
        [(0, ["x"], "greater_than"), (-1.5, ["x"], "greater_than")]),
    Row("le", t.Annotated[int, Le(10)], [(10, 10)],
        [(11, ["x"], "less_than_equal")]),
    Row("lt", t.Annotated[float, Lt(1)], [(0.99, 0.99)],
        [(1, ["x"], "less_than"), (1.5, ["x"], "less_than")]),
    Row("multiple-of", t.Annotated[int, MultipleOf(5)], [(0, 0), (15, 15), (-10, -10)],
        [(7, ["x"], "multiple_of")]),
    Row("interval", t.Annotated[float, Interval(gt=0, le=10)], [(10, 10.0), (0.5, 0.5)],
        [(0, ["x"], "greater_than"), (10.5, ["x"], "less_than_equal")]),
    Row("predicate", t.Annotated[str, Predicate(str.islower)], [("abc", "abc")],
        [("Abc", ["x"], "predicate_failed")]),
    Row("field-pattern", t.Annotated[str, Field(pattern=r"^[a-z]+-\d+$")],
        [("ab-12", "ab-12")],
        [("ab12", ["x"], "string_pattern_mismatch"), ("AB-1", ["x"], "string_pattern_mismatch")]),
    Row("decimal-digits", t.Annotated[Decimal, Field(max_digits=4, decimal_places=2)],
        [("12.34", Decimal("12.34")), (1.5, Decimal("1.5"))],
        [("123.45", ["x"], "decimal_max_digits"), ("1.234", ["x"], "decimal_max_places"),
         ("abc", ["x"], "decimal_parsing")]),
    # ------------------------------------------------------------- item constraints
    Row("list-items", list[t.Annotated[int, Ge(0)]], [([0, 3], [0, 3])],
        [([1, -1], ["x", 1], "greater_than_equal")]),
    Row("dict-values", dict[str, t.Annotated[str, MaxLen(2)]], [({"k": "ab"}, {"k": "ab"})],
        [({"k": "ab", "v": "abc"}, ["x", "v"], "string_too_long")]),
    Row("dict-keys", dict[t.Annotated[str, MinLen(2)], int], [({"ab": 1}, {"ab": 1})],
        [({"a": 1}, ["x", "a", "[key]"], "string_too_short")]),
    Row("constrained-list-of-models", t.Annotated[list[Inner], MaxLen(1)],
        [([{"n": 1}], [Inner(n=1)])],
        [([{"n": 1}, {"n": 2}], ["x"], "too_long"),
         ([{"n": "z"}], ["x", 0, "n"], "int_parsing")]),
]

GOOD = [pytest.param(r.annotation, v, want, id=f"{r.id}-{i}")
        for r in ROWS for i, (v, want) in enumerate(r.good)]
BAD = [pytest.param(r.annotation, v, loc, kind, id=f"{r.id}-{i}")
       for r in ROWS for i, (v, loc, kind) in enumerate(r.bad)]


@pytest.mark.parametrize(("annotation", "value", "want"), GOOD)
def test_accepts(annotation: t.Any, value: t.Any, want: t.Any):
    got = decode(annotation, send(value))["x"]
    assert got == want
    assert type(got) is type(want)


@pytest.mark.parametrize(("annotation", "value", "loc", "kind"), BAD)
def test_refuses_at_the_right_location(annotation: t.Any, value: t.Any, loc: list[t.Any],
                                       kind: str):
    with pytest.raises(InvalidArgument) as info:
        decode(annotation, send(value))
    first = info.value.detail[0]
    assert (first["loc"], first["type"]) == (loc, kind), info.value.detail


def test_several_violations_are_all_reported():
    class Two(BaseModel):
        a: t.Annotated[int, Ge(0)]
        b: t.Annotated[str, MaxLen(1)]

    with pytest.raises(InvalidArgument) as info:
        decode(Two, send({"a": -1, "b": "long"}))
    assert [d["loc"] for d in info.value.detail] == [["x", "a"], ["x", "b"]]
    assert "(and 1 more)" in info.value.message


def test_optional_null_and_absent_are_none():
    ann = t.Optional[t.Annotated[int, Ge(0)]]  # noqa: UP045 - the spelling under test
    assert decode(ann, b'{"x": null}', default=None) == {"x": None}
    assert decode(ann, b"{}", default=None) == {"x": None}
    assert decode(ann, send(3), default=None) == {"x": 3}
    with pytest.raises(InvalidArgument) as info:
        decode(ann, send(-1), default=None)
    assert info.value.detail[0]["loc"] == ["x"]
    with pytest.raises(InvalidArgument):
        decode(ann, send("a"), default=None)


def test_defaults_fill_absent_fields_and_required_ones_are_missing():
    assert decode(int, b"{}", default=7) == {"x": 7}
    with pytest.raises(InvalidArgument) as info:
        decode(int, b"{}")
    assert info.value.detail[0] == {"loc": ["x"], "msg": "Field required", "type": "missing"}


def test_unknown_fields_and_bad_json_are_refused():
    with pytest.raises(InvalidArgument) as info:
        decode(int, b'{"x": 1, "y": 2}')
    assert info.value.detail[0]["loc"] == ["y"]
    assert info.value.detail[0]["type"] == "extra_forbidden"
    with pytest.raises(InvalidArgument) as info:
        decode(int, b'{"x": ')
    assert info.value.detail[0]["type"] == "json_invalid"


def test_root_input_takes_the_body_as_the_value():
    def method(self, x, /):  # type: ignore[no-untyped-def]
        return 1

    method.__annotations__ = {"x": t.Annotated[list[int], MinLen(1)], "return": int}
    svc = tensorwire.service(type("Svc", (), {"method": tensorwire.api(method)}))
    api = Decoder(tensorwire.get_service_spec(svc).apis["method"])
    assert api.decode_json(b"[1, 2]") == {"x": [1, 2]}
    with pytest.raises(InvalidArgument) as info:
        api.decode_json(b"[]")
    assert info.value.detail[0]["loc"] == ["x"]
    with pytest.raises(InvalidArgument) as info:
        api.decode_json(b'[1, "a"]')
    assert info.value.detail[0]["loc"] == ["x", 1]


@pytest.mark.parametrize("row", [r for r in ROWS if r.good and r.id not in ("any",)],
                         ids=lambda r: r.id)
def test_json_and_python_values_validate_alike(row: Row):
    """decode_values (gRPC, multipart) takes what decode_json produced, unchanged."""
    api = api_for(row.annotation)
    for value, want in row.good:
        from_json = api.decode_json(send(value))
        assert api.decode_values(dict(from_json)) == from_json == {"x": want}
