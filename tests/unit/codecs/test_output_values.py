"""`Codec.output_value`: the one check of an API's output, before either protocol writes it.

A value of the declared type is written as it is (no validation on the hot path); any
other is validated into the declared type (dicts for models get their defaults), and
one that cannot be is a ValidationError, which both transports answer as a server error.
"""

from __future__ import annotations

import datetime as dt
import enum
import typing as t
import uuid

import numpy as np
import pytest
from pydantic import BaseModel, ValidationError

from tensorwire.codecs import codec_for


class Out(BaseModel):
    a: int
    b: str = "x"


class Color(enum.Enum):
    RED = "red"


class Opaque:
    """Any object at all (its repr is stable, for xdist's test ids)."""

    def __repr__(self) -> str:
        return "Opaque()"


OPAQUE = Opaque()


@pytest.mark.parametrize(("annotation", "value"), [
    (int, 3), (float, 1.5), (bool, True), (str, "s"), (bytes, b"x"), (bytes, bytearray(b"x")),
    (Out, Out(a=1)), (Out | None, Out(a=1)), (Out | None, None), (Color, Color.RED),
    (dt.datetime, dt.datetime(2024, 1, 1)), (dt.timedelta, dt.timedelta(1)),
    (uuid.UUID, uuid.UUID(int=1)), (dict, {"k": OPAQUE}), (t.Any, OPAQUE),
], ids=repr)
def test_a_value_of_the_declared_type_is_written_as_it_is(annotation, value):
    assert codec_for(annotation).output_value(value) is value


@pytest.mark.parametrize(("annotation", "value", "expect"), [
    (int, "3", 3), (int, np.int64(3), 3), (float, 2, 2.0), (float, np.float32(1.5), 1.5),
    (Out, {"a": 1}, Out(a=1, b="x")), (Out | None, {"a": 1}, Out(a=1)),
    (list[Out], [{"a": 1}, Out(a=2)], [Out(a=1), Out(a=2)]),
    (dict[str, Out], {"k": {"a": 1}}, {"k": Out(a=1)}),
    (list[int], ("1", 2), [1, 2]), (Color, "red", Color.RED),
], ids=repr)
def test_other_values_are_validated_into_the_declared_type(annotation, value, expect):
    got = codec_for(annotation).output_value(value)
    assert got == expect
    assert type(got) is type(expect)


@pytest.mark.parametrize(("annotation", "value"), [
    (int, "abc"), (int, 3.7), (bool, "abc"), (str, 5), (t.Literal[1, 2], 5),
    (Out, {"a": "x"}), (Out | None, {"b": "y"}), (list[Out], [{"a": "x"}]),
    (dict[str, Out], {"k": {}}), (list[int], ["abc"]), (Color, "blue"), (dt.datetime, "no"),
], ids=repr)
def test_a_value_of_the_wrong_type_raises(annotation, value):
    with pytest.raises(ValidationError):
        codec_for(annotation).output_value(value)


def test_family_codecs_check_their_own_values():
    array = np.zeros(2)
    assert codec_for(np.ndarray).output_value(array) is array
    assert codec_for(list[np.ndarray]).output_value([array])[0] is array
