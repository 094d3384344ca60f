"""Discriminated unions of models (beyond BentoML): JSON tagged objects, a gRPC oneof."""

from __future__ import annotations

import typing as t

import grpc
import pytest
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.protobuf.descriptors import ServiceProto
from tests.support.grpc_calls import GrpcCaller, error_locs
from tests.support.http_calls import post
from tests.support.servers import serving


class Cat(BaseModel):
    kind: t.Literal["cat"] = "cat"
    lives: int = 9


class Dog(BaseModel):
    kind: t.Literal["dog"] = "dog"
    good: bool = True


Pet = t.Annotated[Cat | Dog, Field(discriminator="kind")]


class Household(BaseModel):
    pets: list[Pet] = []


@tensorwire.service
class Pets:
    @tensorwire.api
    def describe(self, pet: Cat | Dog = Field(discriminator="kind")) -> str:
        return f"cat with {pet.lives} lives" if isinstance(pet, Cat) else f"dog good={pet.good}"

    @tensorwire.api
    def count(self, home: Household) -> dict[str, int]:
        return {"cats": sum(isinstance(p, Cat) for p in home.pets),
                "dogs": sum(isinstance(p, Dog) for p in home.pets)}

    @tensorwire.api
    def adopt(self, kind: str) -> Pet:
        return Cat(lives=3) if kind == "cat" else Dog(good=False)


def test_plain_unions_are_still_refused():
    with pytest.raises(TypeError, match="discriminated union"):
        @tensorwire.service
        class Bad:
            @tensorwire.api
            def m(self, pet: Cat | Dog) -> str: ...


def test_the_union_is_a_oneof_in_the_proto():
    text = ServiceProto(tensorwire.get_service_spec(Pets)).proto_text()
    assert "message CatOrDog {\n  oneof choice {\n    Cat cat = 1;\n    Dog dog = 2;\n  }\n}" \
        in text
    assert "repeated CatOrDog pets = 1;" in text


@pytest.fixture(scope="module")
def server():
    with serving(Pets) as s:
        yield s


@pytest.mark.parametrize(("pet", "expect"), [
    ({"kind": "cat", "lives": 7}, "cat with 7 lives"),
    ({"kind": "dog"}, "dog good=True"),
])
def test_both_protocols_pick_the_variant(server, pet, expect):
    assert post(server.http_url + "/describe", {"pet": pet}).text == expect
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        # the oneof names the variant; the discriminator need not be repeated
        variant = {k: v for k, v in pet.items() if k != "kind"}
        model = Cat(**variant) if pet["kind"] == "cat" else Dog(**variant)
        assert caller.call("describe", {"pet": model}) == expect
        assert caller.call("count", {"home": {"pets": [Cat(), Dog(), Cat()]}}) == {
            "cats": 2, "dogs": 1}
        assert caller.call("adopt", {"kind": "cat"}) == {"kind": "cat", "lives": 3}


def test_bad_variants_are_rejected_at_the_field(server):
    reply = post(server.http_url + "/describe", {"pet": {"kind": "fish"}})
    assert reply.status == 400
    assert reply.error_locs()[0][0] == "pet"
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        empty = caller.proto.messages["describe"].request_cls()
        empty.pet.SetInParent()  # a union message with no variant set
        with pytest.raises(grpc.RpcError) as info:
            caller.call("describe", raw=empty)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_locs(info.value) == [["pet"]]
