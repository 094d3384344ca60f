"""`Decoder.read_values_decoder`: the compiled handlers' decode of values read from a
protobuf message validates, refuses and reports exactly as `decode_values`."""

from __future__ import annotations

import math
import typing as t

import pytest
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.contract.decoding import Decoder
from tensorwire.errors import TensorwireError

Feature = t.Annotated[float, Field(ge=0, le=100)]


class Point(BaseModel):
    x: float
    y: float = 0.0


@tensorwire.service
class Decoded:
    @tensorwire.api
    def features(self, a: Feature, b: int = 1, name: str = "n") -> int:
        raise NotImplementedError

    @tensorwire.api
    def point(self, p: Point, scale: float = 1.0) -> int:
        raise NotImplementedError

    @tensorwire.api
    def root(self, x: t.Annotated[int, Field(gt=0)], /) -> int:
        raise NotImplementedError


APIS = tensorwire.get_service_spec(Decoded).apis


def _both(api: str, values: dict[str, t.Any]) -> tuple[t.Any, t.Any]:
    """(decode_values', read_values_decoder's) outcome: the arguments or the error."""
    decoder = Decoder(APIS[api])
    outcomes = []
    for decode in (decoder.decode_values, decoder.read_values_decoder()):
        try:
            outcomes.append(decode(dict(values)))
        except TensorwireError as exc:
            outcomes.append((type(exc), str(exc), exc.grpc_code, exc.detail))
    return outcomes[0], outcomes[1]


@pytest.mark.parametrize(("api", "values"), [
    ("features", {"a": 1.5}),
    ("features", {"a": 0.0, "b": 0, "name": ""}),
    ("features", {"a": 101.0}),                # above the bound
    ("features", {}),                          # a required input missing
    ("features", {"a": 1.0, "b": "x"}),        # not an int
    ("features", {"a": math.nan}),             # NaN refused by pydantic's own check
    ("point", {"p": {"x": 1.0}}),
    ("point", {"p": {"x": math.inf}}),         # a user's model: walked for non-finite
    ("point", {"p": {"y": 1.0}}),
    ("root", {"x": 3}), ("root", {"x": 0}), ("root", {}),
])
def test_read_values_decode_as_decode_values(api: str, values: dict[str, t.Any]) -> None:
    general, compiled = _both(api, values)
    assert compiled == general


def test_arguments_are_the_validated_values_not_the_model() -> None:
    decode = Decoder(APIS["point"]).read_values_decoder()
    kwargs = decode({"p": {"x": 2}, "scale": 3})
    assert kwargs == {"p": Point(x=2.0), "scale": 3.0}
    assert type(kwargs["scale"]) is float and isinstance(kwargs["p"], Point)


def test_a_nonfinite_value_in_a_walked_model_is_refused_with_its_path() -> None:
    with pytest.raises(TensorwireError) as refused:
        Decoder(APIS["point"]).read_values_decoder()({"p": {"x": math.nan}})
    assert refused.value.grpc_code == "INVALID_ARGUMENT"
    assert [v["loc"] for v in refused.value.detail] == [["p", "x"]]


@pytest.mark.parametrize(("api", "body"), [
    ("features", b'{"a": 1.5}'), ("features", b'{"a": 1.5, "b": 2, "name": "x"}'),
    ("features", b'{"a": 101}'), ("features", b""), ("features", b"{}"),
    ("features", b'{"a": 1, "extra": 2}'), ("features", b"[1]"), ("features", b"{bad"),
    ("features", b'{"a": NaN}'),
    ("point", b'{"p": {"x": 1}}'), ("point", b'{"p": {"x": "inf"}}'),
    ("root", b"3"), ("root", b"0"),
])
def test_the_bound_json_decoder_decodes_as_decode_json(api: str, body: bytes) -> None:
    decoder = Decoder(APIS[api])
    outcomes = []
    for decode in (decoder.decode_json, decoder.json_decoder()):
        try:
            outcomes.append(decode(body))
        except TensorwireError as exc:
            outcomes.append((type(exc), str(exc), exc.grpc_code, exc.detail))
    assert outcomes[1] == outcomes[0]


def test_the_bound_decoders_call_the_models_validator_straight() -> None:
    decoder = Decoder(APIS["features"])
    assert decoder.json_decoder().__name__ == "decode_json"
    assert decoder.read_values_decoder().__name__ == "decode_values"
    assert decoder.read_values_decoder().__closure__ is not None
    held = {c.cell_contents for c in decoder.read_values_decoder().__closure__}
    assert APIS["features"].input_model.__pydantic_validator__.validate_python in held


def test_an_elements_value_decodes_as_a_one_value_request() -> None:
    """A streamed input's element (JSON text from a WebSocket message, or a value a
    binary message gave) validates as the one-field request of that value would, with
    the same errors; an empty message is the input left out."""
    from tensorwire.codecs import MISSING, JsonText
    from tests.support.stream_services import Streams

    apis = tensorwire.get_service_spec(Streams).apis
    element = Decoder(apis["average"]).element_decoder()
    values = element(JsonText(b'{"sensor": "a", "value": 2}'))
    assert values == Decoder(apis["average"]).decode_values(
        {"readings": JsonText(b'{"sensor": "a", "value": 2}')})
    assert values["readings"].value == 2.0
    with pytest.raises(TensorwireError) as info:
        element(JsonText(b'{"sensor": "a", "value": 200}'))
    assert info.value.detail[0]["loc"] == ["readings", "value"]
    with pytest.raises(TensorwireError) as info:
        element(JsonText(b'{"sensor": "a", "value": NaN}'))
    with pytest.raises(TensorwireError) as info:
        element(MISSING)
    assert info.value.detail[0]["loc"] == ["readings"] and "required" in info.value.message
    frames = Decoder(apis["total"]).element_decoder()
    assert frames(JsonText(b"[1, 2]"))["frames"].tolist() == [1.0, 2.0]
    upper = Decoder(apis["upper"]).element_decoder()  # a root input
    assert upper("text") == {"words": "text"}
