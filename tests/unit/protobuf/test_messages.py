"""`APIMessages.response_encoder`: the bound per-message encoder writes exactly what
`response_bytes` writes, and refuses what it refuses."""

from __future__ import annotations

import enum
import math
import typing as t

import numpy as np
import pytest
from annotated_types import Ge
from pydantic import BaseModel

import tensorwire
from tensorwire.errors import TensorwireError
from tensorwire.protobuf.descriptors import service_proto


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


class Pair(BaseModel):
    a: int
    b: str = "x"


@tensorwire.service
class Outputs:
    @tensorwire.api
    def text(self) -> str:
        raise NotImplementedError

    @tensorwire.api
    def count(self) -> int:
        raise NotImplementedError

    @tensorwire.api
    def score(self) -> float:
        raise NotImplementedError

    @tensorwire.api
    def flag(self) -> bool:
        raise NotImplementedError

    @tensorwire.api
    def blob(self) -> bytes:
        raise NotImplementedError

    @tensorwire.api
    def positive(self) -> t.Annotated[int, Ge(0)]:
        raise NotImplementedError

    @tensorwire.api
    def maybe(self) -> int | None:
        raise NotImplementedError

    @tensorwire.api
    def choice(self) -> t.Literal["a", "b"]:
        raise NotImplementedError

    @tensorwire.api
    def mood(self) -> Mood:
        raise NotImplementedError

    @tensorwire.api
    def values(self) -> list[float]:
        raise NotImplementedError

    @tensorwire.api
    def pair(self) -> Pair:
        raise NotImplementedError

    @tensorwire.api
    def tensor(self) -> np.ndarray:
        raise NotImplementedError

    @tensorwire.api
    def tokens(self) -> t.Iterator[str]:
        yield "never called"


MESSAGES = service_proto(tensorwire.get_service_spec(Outputs)).messages


@pytest.mark.parametrize(("api", "value"), [
    ("text", "tok "), ("text", ""), ("tokens", "héllo"),
    ("count", 7), ("count", 0), ("positive", 5), ("flag", 1),
    ("score", 0.25), ("flag", True), ("flag", False),
    ("blob", b"\x00\x01"), ("maybe", None), ("maybe", 3), ("choice", "b"),
    ("mood", Mood.SAD), ("values", [1.0, 2.5]), ("pair", Pair(a=1)),
    ("pair", {"a": 2, "b": "y"}), ("tensor", np.arange(3, dtype=np.float32)),
])
def test_the_bound_encoder_writes_what_response_bytes_writes(api: str, value: t.Any) -> None:
    messages = MESSAGES[api]
    assert messages.response_encoder()(value) == messages.response_bytes(value)


def test_scalar_results_take_the_bound_path() -> None:
    for api in ("text", "count", "score", "flag", "blob", "tokens"):
        messages = MESSAGES[api]
        assert messages.response_encoder() != messages.response_bytes, api


def test_only_a_value_of_exactly_the_field_s_type_is_written_as_it_is() -> None:
    """str, int, bool, bytes skip the output check; a float goes through the finite
    check, a Literal through its validation."""
    verbatim = {api: MESSAGES[api].api.output.codec.proto.verbatim_type()
                for api in ("text", "count", "flag", "blob", "score", "choice")}
    assert verbatim == {"text": str, "count": int, "flag": bool, "blob": bytes,
                        "score": None, "choice": None}


@pytest.mark.parametrize(("api", "value"), [
    ("score", math.nan),   # NaN only where the contract opts in
    ("choice", "c"),       # not one of the Literal's values
    ("count", "seven"),    # not an int at all
])
def test_the_bound_encoder_refuses_what_response_bytes_refuses(api: str, value: t.Any
                                                                ) -> None:
    messages = MESSAGES[api]
    with pytest.raises((TensorwireError, ValueError)) as general:
        messages.response_bytes(value)
    with pytest.raises(general.type):
        messages.response_encoder()(value)


class Scored(BaseModel):
    label: str
    score: float
    rank: int = 0
    top: bool = False


class Tagged(BaseModel):
    label: str
    note: str | None = None
    mood: Mood = Mood.HAPPY


class Nested(BaseModel):
    pair: Pair
    tags: list[str] = []


@tensorwire.service
class ModelOutputs:
    @tensorwire.api
    def scored(self) -> Scored:
        raise NotImplementedError

    @tensorwire.api
    def nested(self) -> Nested:
        raise NotImplementedError

    @tensorwire.api
    def tagged(self) -> Tagged:
        raise NotImplementedError


MODEL_MESSAGES = service_proto(tensorwire.get_service_spec(ModelOutputs)).messages


@pytest.mark.parametrize("value", [
    Scored(label="a", score=0.5), Scored(label="", score=0.0, rank=-3, top=True),
    {"label": "b", "score": 2}, Pair(a=1),
])
def test_a_model_of_scalars_is_written_as_response_bytes_writes_it(value: t.Any) -> None:
    messages = MODEL_MESSAGES["scored"]
    encode = messages.response_encoder()
    assert encode != messages.response_bytes  # one constructor call
    if isinstance(value, Pair):  # not the declared model: refused by both
        with pytest.raises(Exception) as general:
            messages.response_bytes(value)
        with pytest.raises(general.type):
            encode(value)
        return
    assert encode(value) == messages.response_bytes(value)


def test_a_model_of_scalars_refuses_a_nonfinite_float_under_its_field() -> None:
    messages = MODEL_MESSAGES["scored"]
    value = Scored.model_construct(label="a", score=math.nan)
    with pytest.raises(Exception) as general:
        messages.response_bytes(value)
    with pytest.raises(general.type) as bound:
        messages.response_encoder()(value)
    assert str(bound.value) == str(general.value)
    assert bound.value.loc == general.value.loc == ("score",)


@pytest.mark.parametrize(("api", "value"), [
    ("nested", Nested(pair=Pair(a=3), tags=["x"])),
    ("tagged", Tagged(label="t", note="n", mood=Mood.SAD)),
    ("tagged", Tagged(label="t")),
])
def test_a_model_with_messages_lists_or_own_writers_keeps_response_bytes(
        api: str, value: t.Any) -> None:
    messages = MODEL_MESSAGES[api]
    assert messages.response_encoder() == messages.response_bytes
    assert messages.response_encoder()(value) == messages.response_bytes(value)
