"""JSON-side breaking changes, told from the schema.json of two versions of a service.

No `from __future__ import annotations`: the versions are declared inside the tests,
and their annotations are evaluated where the local names are in scope.
"""

import typing as t
from collections.abc import Generator
from pathlib import Path

import numpy as np
import pytest
from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen, MultipleOf
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.contract.compat import (
    CONSTRAINT_NARROWED,
    INPUT_REMOVED,
    NEW_REQUIRED_INPUT,
    OUTPUT_FIELD_REMOVED,
    ROUTE_REMOVED,
    TYPE_CHANGED,
    Finding,
    json_breaking,
)
from tensorwire.http.schema import schema_json
from tensorwire.validators import ContentType, DType, Shape


def breaking(old: type, new: type) -> list[Finding]:
    return json_breaking(schema_json(tensorwire.get_service_spec(old)),
                         schema_json(tensorwire.get_service_spec(new)))


def one_input(annotation: t.Any, default: t.Any = ..., output: t.Any = str) -> type:
    """A service whose one API `predict` takes `x: annotation` (required unless a default
    is given) and returns `output`."""
    if default is ...:
        def predict(self, x: annotation) -> output: ...  # type: ignore[valid-type]
    else:
        def predict(self, x: annotation = default) -> output: ...  # type: ignore[valid-type]

    return tensorwire.service(type("Svc", (), {"predict": tensorwire.api(predict)}))


def test_adding_an_optional_input_or_an_output_field_or_widening_is_silent():
    class Out1(BaseModel):
        score: float

    class Out2(BaseModel):
        score: float
        label: str = ""

    @tensorwire.service
    class Old:
        @tensorwire.api
        def predict(self, x: t.Annotated[int, Le(10)],
                    img: t.Annotated[Path, ContentType("image/png")],
                    arr: t.Annotated[np.ndarray, Shape((1, 4))]) -> Out1: ...

    @tensorwire.service
    class New:
        @tensorwire.api
        def predict(self, x: t.Annotated[float, Le(100)],
                    img: t.Annotated[Path, ContentType("image/*")],
                    arr: t.Annotated[np.ndarray, Shape((-1, 4))],
                    note: str = "", extra: int | None = None) -> Out2: ...

        @tensorwire.api
        def other(self, y: int) -> int: ...

    assert breaking(Old, New) == []


def test_a_new_required_input_names_the_api_and_the_parameter():
    @tensorwire.service
    class Old:
        @tensorwire.api
        def predict(self, x: int, lang: str = "en") -> str: ...

    @tensorwire.service
    class New:
        @tensorwire.api
        def predict(self, x: int, y: int, lang: str) -> str: ...

    found = breaking(Old, New)
    assert [(f.api, f.where, f.rule) for f in found] == [
        ("predict", 'input "y"', NEW_REQUIRED_INPUT),
        ("predict", 'input "lang"', NEW_REQUIRED_INPUT)]
    assert "new required input" in found[0].message
    assert "had a default" in found[1].message
    assert str(found[0]).startswith('predict: input "y": new required input')


def test_removed_inputs_and_output_fields_are_reported():
    class Out1(BaseModel):
        score: float
        label: str

    class Out2(BaseModel):
        score: float

    @tensorwire.service
    class Old:
        @tensorwire.api
        def predict(self, x: int, note: str = "") -> Out1: ...

    @tensorwire.service
    class New:
        @tensorwire.api
        def predict(self, x: int) -> Out2: ...

    assert [(f.where, f.rule) for f in breaking(Old, New)] == [
        ('input "note"', INPUT_REMOVED), ('output field "label"', OUTPUT_FIELD_REMOVED)]


@pytest.mark.parametrize(("old", "new"), [(int, str), (str, list[str]), (float, int)])
def test_a_changed_input_type_is_reported(old, new):
    (found,) = breaking(one_input(old), one_input(new))
    assert (found.api, found.where, found.rule) == ("predict", 'input "x"', TYPE_CHANGED)


def test_an_output_may_narrow_its_type_but_not_widen_it():
    assert breaking(one_input(int, output=float), one_input(int, output=int)) == []
    (found,) = breaking(one_input(int, output=int), one_input(int, output=str))
    assert (found.where, found.rule) == ("output", TYPE_CHANGED)
    (found,) = breaking(one_input(int, output=int), one_input(int, output=int | None))
    assert "may now be null" in found.message


@pytest.mark.parametrize(("old", "new", "fragment"), [
    (t.Annotated[int, Le(10)], t.Annotated[int, Le(5)], "upper bound narrowed from <= 10 "
                                                        "to <= 5"),
    (int, t.Annotated[int, Le(5)], "upper bound narrowed from none to <= 5"),
    (t.Annotated[int, Le(10)], t.Annotated[int, Lt(10)], "from <= 10 to < 10"),
    (t.Annotated[int, Ge(0)], t.Annotated[int, Gt(0)], "lower bound narrowed from >= 0 "
                                                       "to > 0"),
    (t.Annotated[str, MaxLen(10)], t.Annotated[str, MaxLen(5)], "maxLength lowered"),
    (str, t.Annotated[str, MinLen(2)], "minLength raised from 0 to 2"),
    (t.Annotated[int, MultipleOf(2)], t.Annotated[int, MultipleOf(4)], "multipleOf"),
    (str, t.Annotated[str, Field(pattern="^a")], "pattern changed"),
    (t.Literal["a", "b"], t.Literal["a"], "no longer accepts 'b'"),
    (t.Annotated[list[int], MaxLen(3)], t.Annotated[list[int], MaxLen(2)], "maxItems"),
    (t.Annotated[np.ndarray, Shape((-1, 4))], t.Annotated[np.ndarray, Shape((1, 4))],
     "Shape changed from (*, 4) to (1, 4)"),
    (t.Annotated[np.ndarray, Shape((-1, 4))], t.Annotated[np.ndarray, Shape((-1, 4, 1))],
     "Shape changed"),
    (t.Annotated[np.ndarray, DType("float32")], t.Annotated[np.ndarray, DType("float64")],
     "DType changed from float32 to float64"),
    (np.ndarray, t.Annotated[np.ndarray, DType("float64")], "DType changed from any"),
    (t.Annotated[Path, ContentType("image/*")], t.Annotated[Path, ContentType("image/png")],
     "ContentType changed from image/* to image/png"),
])
def test_a_narrowed_constraint_is_reported(old, new, fragment):
    (found,) = breaking(one_input(old), one_input(new))
    assert (found.api, found.where, found.rule) == ("predict", 'input "x"',
                                                    CONSTRAINT_NARROWED)
    assert fragment in found.message


def test_an_input_that_no_longer_takes_null_is_narrowed():
    (found,) = breaking(one_input(int | None, None), one_input(int, 0))
    assert (found.rule, found.message.split(":")[0]) == (CONSTRAINT_NARROWED,
                                                        "no longer accepts null")


def test_removed_and_moved_routes_are_reported():
    @tensorwire.service
    class Old:
        @tensorwire.api
        def predict(self, x: int) -> int: ...

        @tensorwire.api
        def explain(self, x: int) -> str: ...

    @tensorwire.service
    class New:
        @tensorwire.api(route="/v2/predict")
        def predict(self, x: int) -> int: ...

    found = breaking(Old, New)
    assert [(f.api, f.where, f.rule) for f in found] == [
        ("predict", "POST /predict", ROUTE_REMOVED), ("explain", "POST /explain",
                                                      ROUTE_REMOVED)]
    assert "moved to /v2/predict" in found[0].message


def test_fields_of_nested_models_are_named_by_their_path():
    class Review1(BaseModel):
        text: str
        stars: int = 3

    class Review2(BaseModel):
        text: t.Annotated[str, MaxLen(100)]
        stars: int
        lang: str

    @tensorwire.service
    class Old:
        @tensorwire.api
        def analyze(self, params: Review1) -> Review1: ...

    @tensorwire.service
    class New:
        @tensorwire.api
        def analyze(self, params: Review2) -> Review2: ...

    assert [(f.where, f.rule) for f in breaking(Old, New)] == [
        ('input "params.stars"', NEW_REQUIRED_INPUT),
        ('input "params.lang"', NEW_REQUIRED_INPUT),
        ('input "params.text"', CONSTRAINT_NARROWED)]


def test_a_root_input_is_named_by_its_parameter():
    @tensorwire.service
    class Old:
        @tensorwire.api
        def shout(self, text: str, /) -> str: ...

    @tensorwire.service
    class New:
        @tensorwire.api
        def shout(self, text: t.Annotated[str, MaxLen(5)], /) -> str: ...

    (found,) = breaking(Old, New)
    assert (found.api, found.where, found.rule) == ("shout", 'input "text"',
                                                    CONSTRAINT_NARROWED)


def test_a_stream_that_becomes_one_value_and_a_new_media_type_are_changed_outputs():
    @tensorwire.service
    class Old:
        @tensorwire.api
        def tokens(self, x: str) -> Generator[str, None, None]:
            yield x

        @tensorwire.api
        def text(self, x: str) -> str: ...

    @tensorwire.service
    class New:
        @tensorwire.api
        def tokens(self, x: str) -> list[str]: ...

        @tensorwire.api
        def text(self, x: str) -> dict[str, str]: ...

    found = breaking(Old, New)
    assert [(f.api, f.where, f.rule) for f in found][:2] == [
        ("tokens", "output", TYPE_CHANGED), ("text", "output", TYPE_CHANGED)]
    assert "from a stream to one value" in found[0].message
    assert "media type changed from text/plain to application/json" in found[1].message
