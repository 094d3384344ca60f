"""Every definition-time rule raises a TypeError naming class, method and parameter."""

from __future__ import annotations

import datetime as dt
import typing as t

import pytest
from annotated_types import Ge, MaxLen, Timezone
from pydantic import BaseModel, Field

import tensorwire
from tensorwire.validators import Shape


class Params(BaseModel):
    a: int


class Opaque:
    """A class neither tensorwire nor pydantic knows how to validate."""


def define(method: t.Callable[..., t.Any], **api_kwargs: t.Any) -> type:
    ns = {"method": tensorwire.api(**api_kwargs)(method) if api_kwargs else tensorwire.api(method)}
    return tensorwire.service(type("Svc", (), ns))


def _method(code: str) -> t.Callable[..., t.Any]:
    ns: dict[str, t.Any] = {"t": t, "Params": Params, "tensorwire": tensorwire, "Ge": Ge,
                            "Shape": Shape, "Opaque": Opaque, "dt": dt, "Timezone": Timezone}
    exec(code, ns)  # signatures with / and ** cannot be written as lambdas
    return ns["method"]


CASES = [
    ("def method(self, x: t.Union[int, str]) -> int: ...", "x", "Union"),
    ("def method(self, x: int | str) -> int: ...", "x", "Union"),
    ("def method(self, x: t.Optional[int]) -> int: ...", "x", "needs a default"),
    ("def method(self, x) -> int: ...", "x", "type annotation"),
    ("def method(self, a: int, b: str, /) -> int: ...", "b", "at most one positional-only"),
    ("def method(self, a: int, /, b: str) -> int: ...", "b", "beside nothing but a Context"),
    ("def method(self, **params: t.Any) -> int: ...", "params", "input_spec"),
    ("def method(self, *args: int) -> int: ...", "args", "*args"),
    ("def method(self, x: t.Annotated[int, Shape((1,))]) -> int: ...", "x", "Shape"),
    ("def method(self, x: Opaque) -> int: ...", "x", "unsupported type Opaque"),
    ("def method(self, _x: int) -> int: ...", "_x", "underscore"),
    # pydantic accepts Timezone and enforces nothing: refused, not silently ignored
    ("def method(self, x: t.Annotated[dt.datetime, Timezone(None)]) -> int: ...", "x",
     "Timezone"),
    ("def method(self, x: list[t.Annotated[dt.datetime, Timezone(...)]]) -> int: ...", "x",
     "AwareDatetime"),
    ("def method(self, x: t.Annotated[dt.datetime, Timezone('UTC')] | None = None) -> int: ...",
     "x", "not supported"),
    # a streamed input: the only input, no default, iterated as the method runs
    ("def method(self, x: t.Iterator[int], y: int) -> int: ...", "y", "only input"),
    ("def method(self, x: t.Iterator[int] = iter(())) -> int: ...", "x", "no default"),
    ("async def method(self, x: t.Iterator[int]) -> int: ...", "x", "AsyncIterator[T]"),
    ("def method(self, x: t.AsyncIterator[int]) -> int: ...", "x", "annotate it Iterator[T]"),
    ("def method(self, x: t.Iterator[Opaque]) -> int: ...", "x", "unsupported type Opaque"),
]


@pytest.mark.parametrize(("code", "param", "fragment"), CASES)
def test_rule_raises_naming_class_method_and_parameter(code: str, param: str, fragment: str):
    with pytest.raises(TypeError) as info:
        define(_method(code))
    msg = str(info.value)
    assert "Svc.method()" in msg
    assert repr(param) in msg
    assert fragment in msg


def test_a_streamed_input_cannot_be_batchable():
    with pytest.raises(TypeError, match=r"Svc\.method\(\), parameter 'x'.*batchable"):
        define(_method("def method(self, x: t.Iterator[list[int]]) -> list[int]: ..."),
               batchable=True)


def test_a_streamed_input_is_its_elements_field():
    """The field is one element's (codec, constraints, input model), marked `stream`;
    the Context beside it stays out of the contract."""
    svc = define(_method(
        "async def method(self, x: t.AsyncIterator[t.Annotated[int, Ge(1)]], "
        "ctx: tensorwire.Context) -> int: ..."))
    api = tensorwire.get_service_spec(svc).apis["method"]
    (field,) = api.fields
    assert api.stream_input is field and field.stream and field.required
    assert api.input_model.model_validate({"x": 3}).x == 3
    with pytest.raises(Exception, match="greater than or equal to 1"):
        api.input_model.model_validate({"x": 0})
    root = define(_method("def method(self, x: t.Iterator[str], /) -> str: ..."))
    spec = tensorwire.get_service_spec(root).apis["method"]
    assert spec.is_root and spec.stream_input.name == "x"
    assert spec.root_adapter.validate_python("a") == "a"
    plain = define(_method("def method(self, x: list[int]) -> int: ..."))
    assert tensorwire.get_service_spec(plain).apis["method"].stream_input is None


def test_input_spec_needs_kwargs_and_nothing_else():
    class Spec(tensorwire.IODescriptor):
        a: int

    with pytest.raises(TypeError, match=r"Svc\.method\(\).*\*\*kwargs"):
        define(_method("def method(self) -> int: ..."), input_spec=Spec)
    with pytest.raises(TypeError, match="no other inputs"):
        define(_method("def method(self, x: int, **kw: t.Any) -> int: ..."), input_spec=Spec)


def test_context_is_injected_not_part_of_the_contract():
    svc = define(_method(
        "def method(self, text: str, /, ctx: tensorwire.Context) -> str: ..."))
    api = tensorwire.get_service_spec(svc).apis["method"]
    assert api.is_root
    assert [f.name for f in api.fields] == ["text"]
    assert api.context_param == "ctx"


def test_context_of_any_name_beside_keywords():
    svc = define(_method("def method(self, a: int, whatever: tensorwire.Context) -> int: ..."))
    api = tensorwire.get_service_spec(svc).apis["method"]
    assert api.context_param == "whatever"
    assert [f.name for f in api.fields] == ["a"]


def test_duplicate_routes_and_reserved_routes_are_refused():
    with pytest.raises(TypeError, match="reserved"):
        define(_method("def method(self) -> int: ..."), route="/readyz")

    class Two:
        @tensorwire.api(route="/x")
        def a(self) -> int: ...

        @tensorwire.api(route="/x")
        def b(self) -> int: ...

    with pytest.raises(TypeError, match="already used"):
        tensorwire.service(Two)


def test_generator_annotation_needs_a_generator():
    with pytest.raises(TypeError, match="generator method"):
        define(_method("def method(self) -> t.Generator[str, None, None]:\n    return iter([])"))


def test_service_and_api_decorators_bare_and_with_arguments():
    @tensorwire.service(name="named-svc")
    class A:
        @tensorwire.api(route="custom", name="renamed")
        def method(self, x: int = 1) -> int:
            return x

    spec = tensorwire.get_service_spec(A)
    assert spec.name == "named-svc"
    api = spec.apis["renamed"]
    assert api.route == "/custom"
    assert api.method_name == "method"
    assert A().method(3) == 3  # the class stays a plain, testable class
    assert spec.grpc_service_name == "named_svc.NamedSvc"


def test_not_a_service():
    with pytest.raises(TypeError, match=r"not a @tensorwire\.service"):
        tensorwire.get_service_spec(object)


class Stamped(BaseModel):
    at: t.Annotated[dt.datetime, Timezone(...)]


class Log(BaseModel):
    entries: list[Stamped] = []


def test_timezone_inside_a_model_is_refused_naming_the_field():
    def takes(self, log: Log) -> int: ...

    def returns(self) -> Stamped: ...

    def spec(self, **kw: t.Any) -> int: ...

    with pytest.raises(TypeError, match=r"Svc\.takes\(\), parameter 'log': "
                                        r"Log\.entries: Stamped\.at: .*Timezone"):
        define(takes)
    with pytest.raises(TypeError, match=r"Svc\.returns\(\): return type: Stamped\.at: "):
        define(returns)
    with pytest.raises(TypeError, match=r"Svc\.spec\(\), parameter 'at': .*Timezone"):
        define(spec, input_spec=Stamped)


DEFAULT_CASES = [
    ('def method(self, n: int = "five") -> int: ...', "n", "'five'"),
    ("def method(self, n: t.Annotated[int, Ge(1)] = 0) -> int: ...", "n",
     "greater than or equal to 1"),
    ("def method(self, s: t.Annotated[str, MaxLen(2)] = 'long') -> int: ...", "s",
     "at most 2"),
    ("def method(self, x: int, tags: list[int] = ['a']) -> int: ...", "tags", "at 0"),
    ("def method(self, n: int = Field(default='x', description='d')) -> int: ...", "n",
     "'x'"),
    ("def method(self, text: str = None, /) -> int: ...", "text", "None"),
]


@pytest.mark.parametrize(("code", "param", "fragment"), DEFAULT_CASES)
def test_a_default_failing_its_annotation_is_refused_at_definition(code, param, fragment):
    ns: dict[str, t.Any] = {"t": t, "Ge": Ge, "MaxLen": MaxLen, "Field": Field}
    exec(code, ns)
    with pytest.raises(TypeError) as err:
        define(ns["method"])
    message = str(err.value)
    assert message.startswith(f"Svc.method(), parameter {param!r}: the default "), message
    assert fragment in message


def test_good_defaults_and_default_factories_pass():
    ns: dict[str, t.Any] = {"t": t, "Ge": Ge, "Field": Field}
    exec("def method(self, n: t.Annotated[int, Ge(1)] = 1, x: float = 2, o: int | None = None,"
         " f: list[int] = Field(default_factory=lambda: ['not checked'])) -> int: ...", ns)
    spec = tensorwire.get_service_spec(define(ns["method"]))
    assert [f.name for f in spec.apis["method"].fields] == ["n", "x", "o", "f"]
