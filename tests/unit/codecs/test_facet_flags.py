"""The class flags that say what a facet or codec does differently from its base.

Per-API handlers and encoders are built from these flags (`HttpFacet.json_answer`,
`ProtoFacet.reads_as_held`, ...), read once at start-up. A class that overrides the
method a flag stands for but leaves the flag claiming the base's behaviour would have
its own method skipped on the fast path: the declarations are checked here for every
class reachable in `tensorwire.codecs`, and the builders are shown to read the flag.
"""

from __future__ import annotations

import importlib
import pkgutil
import typing as t

import pytest
from pydantic import BaseModel

import tensorwire
import tensorwire.codecs
from tensorwire.codecs import Codec
from tensorwire.codecs.http_facet import HttpFacet
from tensorwire.codecs.models import ModelProto
from tensorwire.codecs.proto_facet import ProtoFacet
from tensorwire.codecs.scalars import ScalarCodec, ScalarProto
from tensorwire.protobuf import messages
from tensorwire.protobuf.descriptors import service_proto

#: (base class, flag, the methods whose override makes the flag's True untrue).
FLAGS: list[tuple[type, str, tuple[str, ...]]] = [
    (HttpFacet, "json_answer", ("encode",)),
    (HttpFacet, "json_chunks", ("encode_chunk",)),
    (Codec, "output_checked_by_types", ("output_value",)),
    (ProtoFacet, "reads_as_held", ("read_field", "from_proto")),
    (ProtoFacet, "writes_as_converted", ("write_field",)),
    (ScalarProto, "coerces_to_base", ("to_proto",)),
    (ModelProto, "fills_field_by_field", ("fill",)),
]


def _codec_modules() -> None:
    """Import every module of tensorwire.codecs, so that all its classes exist."""
    for info in pkgutil.iter_modules(tensorwire.codecs.__path__):
        importlib.import_module(f"tensorwire.codecs.{info.name}")


def _subclasses(base: type) -> list[type]:
    _codec_modules()
    found: list[type] = []
    todo = [base]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in found and sub.__module__.startswith("tensorwire.codecs"):
                found.append(sub)
                todo.append(sub)
    return found


def _overrides(cls: type, base: type, methods: tuple[str, ...]) -> list[str]:
    return [m for m in methods if getattr(cls, m) is not getattr(base, m)]


@pytest.mark.parametrize(("base", "flag", "methods"), FLAGS,
                         ids=[f"{b.__name__}.{f}" for b, f, _ in FLAGS])
def test_the_base_claims_its_own_behaviour(base: type, flag: str, methods: tuple[str, ...]
                                           ) -> None:
    assert getattr(base, flag) is True


@pytest.mark.parametrize(("base", "flag", "methods"), FLAGS,
                         ids=[f"{b.__name__}.{f}" for b, f, _ in FLAGS])
def test_every_class_that_overrides_the_method_sets_the_flag_false(
        base: type, flag: str, methods: tuple[str, ...]) -> None:
    wrong = [f"{cls.__module__}.{cls.__qualname__} overrides {', '.join(found)} "
             f"but leaves {flag} = True"
             for cls in _subclasses(base)
             if (found := _overrides(cls, base, methods)) and getattr(cls, flag)]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_the_classes_that_override() -> None:
    """The walk reaches the known overriding classes (the check is not vacuous)."""
    overriding = {flag: {cls.__name__ for cls in _subclasses(base)
                         if _overrides(cls, base, methods)}
                  for base, flag, methods in FLAGS}
    assert {"StrHttp", "BytesHttp", "TensorHttp", "FileHttp", "ImageHttp", "ListHttp",
            "OptionalHttp", "ModelHttp"} <= overriding["json_answer"]
    assert {"StrHttp", "FileHttp", "ImageHttp"} <= overriding["json_chunks"]
    assert {"OptionalCodec"} <= overriding["output_checked_by_types"]
    assert {"EnumProto", "ListProto", "MapProto", "OptionalProto", "BytesProto",
            "JsonTextProto", "TensorProto", "ModelProto"} <= overriding["reads_as_held"]
    assert {"EnumProto", "ListProto", "MapProto", "OptionalProto"} <= overriding[
        "writes_as_converted"]
    assert {"DoubleProto"} <= overriding["coerces_to_base"]


def test_a_facet_whose_answers_are_not_json_gets_no_json_encoder() -> None:
    class Declared(HttpFacet):
        json_answer = False

    codec = ScalarCodec(int, int, int)
    assert HttpFacet(codec).json_encoder() is not None
    assert Declared(codec).json_encoder() is None


def test_a_facet_whose_chunks_are_not_json_streams_through_its_encode_chunk() -> None:
    class Declared(HttpFacet):
        json_chunks = False

    facet = Declared(ScalarCodec(int, int, int))
    assert facet.chunk_encoder() == facet.encode_chunk


def test_a_codec_with_its_own_output_rule_writes_nothing_verbatim() -> None:
    class OwnRule(ScalarCodec):
        output_checked_by_types = False

    assert ScalarCodec(str, str, str).proto.verbatim_type() is str
    assert OwnRule(str, str, str).proto.verbatim_type() is None


def test_a_scalar_facet_that_converts_writes_nothing_verbatim() -> None:
    class Converting(ScalarProto):
        coerces_to_base = False

    codec = ScalarCodec(int, int, int)
    assert Converting(codec, int).verbatim_type() is None


@pytest.mark.parametrize("flag", ["reads_as_held", "writes_as_converted"])
def test_the_per_api_reader_and_encoder_read_the_proto_flags(flag: str) -> None:
    declared = type("Declared", (ScalarProto,), {flag: False})
    plain, other = ScalarCodec(int, int, int), ScalarCodec(int, int, int)
    other.proto = declared(other, int)
    check = t.cast(t.Callable[[Codec], bool], messages._read_as_held if flag == "reads_as_held"
                   else messages._written_as_is)
    assert check(plain)
    assert not check(other)


class Pair(BaseModel):
    a: int
    b: str = "x"


@tensorwire.service
class Pairs:
    @tensorwire.api
    def pair(self) -> Pair:
        raise NotImplementedError


def test_a_model_facet_that_fills_otherwise_keeps_response_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Declared(ModelProto):
        fills_field_by_field = False

    api = service_proto(tensorwire.get_service_spec(Pairs)).messages["pair"]
    codec = api.api.output.codec
    assert api.response_encoder() != api.response_bytes  # one constructor call
    monkeypatch.setattr(codec, "proto", Declared(codec))
    assert api.response_encoder() == api.response_bytes
