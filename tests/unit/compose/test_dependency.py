"""`tensorwire.depends`: BentoML's forms, checked at class definition, recorded in the
contract; and `Composition`: where each dependency runs and in what order."""

from __future__ import annotations

import pytest

import tensorwire
from tensorwire.compose.placement import Composition, PlacementError, parse_placements
from tensorwire.contract.dependency import Dependency
from tests.support.composed_services import Model, Pipeline


@tensorwire.service
class Leaf:
    @tensorwire.api
    def f(self, x: int) -> int:
        return x


@tensorwire.service
class Middle:
    leaf = tensorwire.depends(Leaf)

    @tensorwire.api
    def g(self, x: int) -> int:
        return x


@tensorwire.service
class Top:
    middle = tensorwire.depends(Middle)
    leaf = tensorwire.depends(Leaf)  # a diamond: Leaf once, first
    ranker = tensorwire.depends(url="grpc://ranker:50051")
    typed = tensorwire.depends(on=Middle, url="dns:///middle.ns:50051")

    @tensorwire.api
    def h(self, x: int) -> int:
        return x


def test_the_forms_of_depends() -> None:
    dep = Pipeline.model
    assert isinstance(dep, Dependency)  # on the class: the descriptor itself
    assert (dep.on, dep.url, dep.attribute, dep.owner, dep.name) == (
        Model, None, "model", Pipeline, "Model")
    assert Top.ranker.name == "ranker" and Top.ranker.spec is None
    assert Top.typed.name == "Middle" and Top.typed.url == "dns:///middle.ns:50051"
    spec = tensorwire.get_service_spec(Pipeline)
    assert list(spec.dependencies) == ["model"]
    assert all(api.composed for api in spec.apis.values())  # each may call it
    assert not any(api.composed for api in tensorwire.get_service_spec(Model).apis.values())


def test_depends_is_checked_at_definition() -> None:
    with pytest.raises(TypeError, match=r"@tensorwire\.service"):
        tensorwire.depends(int)
    with pytest.raises(ValueError, match="needs the service"):
        tensorwire.depends()
    with pytest.raises(ValueError, match="BentoCloud"):
        tensorwire.depends(deployment="iris-classifier-x6dewa")
    with pytest.raises(ValueError, match="expected a URL"):
        tensorwire.depends(url="model:50051")


def test_inherited_dependencies_and_their_override() -> None:
    @tensorwire.service
    class Child(Pipeline):
        pass

    assert list(tensorwire.get_service_spec(Child).dependencies) == ["model"]

    class Plain(Pipeline):
        model = None  # type: ignore[assignment]

    from tensorwire.contract.dependency import dependencies_of

    assert dependencies_of(Plain) == {}


def test_dependencies_start_first_each_once() -> None:
    top = tensorwire.get_service_spec(Top)
    placed = Composition([top])
    assert [s.name for s in placed.order] == ["Leaf", "Middle", "Top"]
    assert [s.name for s in placed.added] == ["Leaf", "Middle"]
    assert placed.remote == {"ranker": "grpc://ranker:50051",
                             "Middle": "dns:///middle.ns:50051"}


def test_a_placement_setting_moves_a_dependency_elsewhere() -> None:
    top = tensorwire.get_service_spec(Top)
    placed = Composition([top], {"Middle": "grpc://middle:50051"})
    # Middle (and so its Leaf) no longer runs here; Top's own Leaf still does
    assert [s.name for s in placed.order] == ["Leaf", "Top"]
    assert placed.remote["Middle"] == "grpc://middle:50051"


def test_a_service_served_anyway_is_not_added_again() -> None:
    leaf, top = tensorwire.get_service_spec(Leaf), tensorwire.get_service_spec(Top)
    placed = Composition([top, leaf])
    assert [s.name for s in placed.order] == ["Leaf", "Middle", "Top"]
    assert [s.name for s in placed.added] == ["Middle"]


def test_placement_mistakes_are_refused() -> None:
    top = tensorwire.get_service_spec(Top)
    with pytest.raises(PlacementError, match="no service served here depends on Modle"):
        Composition([top], {"Modle": "grpc://x:1"})
    with pytest.raises(PlacementError, match="Middle at 'grpc://x:1/path'"):
        Composition([top], {"Middle": "grpc://x:1/path"})
    with pytest.raises(PlacementError, match="expected NAME=URL"):
        parse_placements(["Model"])
    with pytest.raises(PlacementError, match="placed twice"):
        parse_placements(["A=grpc://a:1", "A=grpc://b:1"])
    assert parse_placements([" A = grpc://a:1 ", "A=grpc://a:1"]) == {"A": "grpc://a:1"}


def test_a_cycle_of_in_process_dependencies_is_named() -> None:
    @tensorwire.service
    class Ping:
        @tensorwire.api
        def f(self) -> int:
            return 1

    @tensorwire.service
    class Pong:
        ping = tensorwire.depends(Ping)

        @tensorwire.api
        def f(self) -> int:
            return 1

    Ping.pong = tensorwire.depends(Pong)  # type: ignore[attr-defined]
    Ping.pong.__set_name__(Ping, "pong")  # type: ignore[attr-defined]
    spec = tensorwire.get_service_spec(Ping)
    spec.dependencies["pong"] = Ping.pong  # type: ignore[attr-defined]
    with pytest.raises(PlacementError, match="cycle: Ping -> Pong -> Ping"):
        Composition([spec])
    # placed elsewhere, the cycle is no start-up problem
    assert [s.name for s in Composition([spec], {"Pong": "grpc://pong:1"}).order] == ["Ping"]
