"""Unknown fields are refused inside the user's models as at the top level, on every
decode path (JSON body, values read from a message or parts, a JSON part, a root input),
unless a model sets `extra` itself; the user's classes are left as they were."""

from __future__ import annotations

import typing as t

import pytest
from pydantic import BaseModel, ConfigDict, Field

import tensorwire
from tensorwire.codecs import JsonText
from tensorwire.contract.closed import closed_schema
from tensorwire.contract.decoding import Decoder
from tensorwire.errors import InvalidArgument


class Author(BaseModel):
    name: str


class Review(BaseModel):
    text: str
    tags: list[str] = Field(default_factory=list)
    author: Author | None = None
    replies: list[Review] = Field(default_factory=list)


class Loose(BaseModel):
    """Sets `extra` itself: its choice stands."""

    model_config = ConfigDict(extra="allow")
    a: int = 0


class Ignoring(BaseModel):
    model_config = ConfigDict(extra="ignore")
    a: int = 0


class Query(tensorwire.IODescriptor):
    query: str
    top_k: int = 3


@tensorwire.service
class Closed:
    @tensorwire.api
    def analyze(self, params: Review) -> int:
        raise NotImplementedError

    @tensorwire.api(input_spec=Query)
    def search(self, **params: t.Any) -> int:
        raise NotImplementedError

    @tensorwire.api
    def loose(self, a: Loose, b: Ignoring) -> int:
        raise NotImplementedError

    @tensorwire.api
    def reviews(self, items: list[Review], /) -> int:
        raise NotImplementedError

    @tensorwire.api
    def plain(self, n: int = 1) -> int:
        raise NotImplementedError


APIS = tensorwire.get_service_spec(Closed).apis


def refused(decode: t.Callable[[], t.Any]) -> list[t.Any]:
    with pytest.raises(InvalidArgument) as info:
        decode()
    assert info.value.grpc_code == "INVALID_ARGUMENT"
    assert all(d["type"] == "extra_forbidden" for d in info.value.detail), info.value.detail
    return [d["loc"] for d in info.value.detail]


def test_a_field_of_a_users_model_is_refused_on_every_path():
    decoder = Decoder(APIS["analyze"])
    body = b'{"params": {"text": "ok", "tag": ["a"]}}'
    assert refused(lambda: decoder.decode_json(body)) == [["params", "tag"]]
    assert refused(lambda: decoder.json_decoder()(body)) == [["params", "tag"]]
    values = {"params": {"text": "ok", "tag": ["a"]}}
    assert refused(lambda: decoder.decode_values(dict(values))) == [["params", "tag"]]
    assert refused(lambda: decoder.read_values_decoder()(dict(values))) == [["params", "tag"]]
    part = {"params": JsonText(b'{"text": "ok", "tag": ["a"]}')}  # a multipart JSON part
    assert refused(lambda: decoder.decode_values(part)) == [["params", "tag"]]


def test_models_nested_and_recursive_are_closed_too():
    decoder = Decoder(APIS["analyze"])
    body = (b'{"params": {"text": "a", "author": {"name": "x", "mail": "y"}, '
            b'"replies": [{"text": "b", "stars": 5}]}}')
    assert refused(lambda: decoder.decode_json(body)) == [
        ["params", "author", "mail"], ["params", "replies", 0, "stars"]]


def test_the_top_level_of_an_input_spec_is_closed():
    decoder = Decoder(APIS["search"])
    assert refused(lambda: decoder.decode_json(b'{"query": "red", "topk": 1}')) == [["topk"]]
    assert refused(lambda: decoder.decode_values({"query": "red", "topk": 1})) == [["topk"]]
    assert decoder.decode_json(b'{"query": "red", "top_k": 1}') == {"query": "red",
                                                                    "top_k": 1}


def test_a_root_input_of_models_is_closed():
    decoder = Decoder(APIS["reviews"])
    assert refused(lambda: decoder.decode_json(b'[{"text": "a", "tag": []}]')) == [
        ["items", 0, "tag"]]
    assert refused(lambda: decoder.decode_values({"items": [{"text": "a", "x": 1}]})) == [
        ["items", 0, "x"]]


def test_a_model_that_sets_extra_keeps_its_choice():
    decoder = Decoder(APIS["loose"])
    kwargs = decoder.decode_json(b'{"a": {"a": 1, "z": 2}, "b": {"a": 1, "z": 2}}')
    assert kwargs["a"].model_extra == {"z": 2}
    assert kwargs["b"] == Ignoring(a=1)


def test_valid_values_are_the_users_own_classes_and_the_classes_are_untouched():
    kwargs = Decoder(APIS["analyze"]).decode_json(
        b'{"params": {"text": "ok", "author": {"name": "x"}}}')
    assert type(kwargs["params"]) is Review and type(kwargs["params"].author) is Author
    # The user's own code validates as pydantic always did.
    assert Review.model_validate({"text": "ok", "tag": ["a"]}).tags == []
    assert Query.model_validate({"query": "q", "topk": 1}).top_k == 3


def test_a_schema_with_no_open_model_is_left_as_it_is():
    assert closed_schema(APIS["plain"].input_model.__pydantic_core_schema__) is None
    assert closed_schema(Loose.__pydantic_core_schema__) is None
    assert closed_schema(Review.__pydantic_core_schema__) is not None
