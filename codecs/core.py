"""What a codec is: the one owner of a family of Python types, with one facet per wire.

A codec is built once per annotation, at class-definition time. Its core answers what
every wire shares: the pydantic annotation that validates the value (JSON Schema
included), the check of an output value, the device tensors a value holds, and, for
families that can, how values merge along a batch dimension (`batch`). What is
particular to one wire lives in a facet, a small object with plain attributes:

- `http` (`http_facet.HttpFacet`): body media, body and part decoding, response and
  stream-chunk encoding, whether the value travels as a file;
- `proto` (`proto_facet.ProtoFacet`): the protobuf field it becomes, reading and
  writing it, and the zero-copy split of big bytes fields;
- `v2` (`v2_facet.V2Facet`): the Open Inference Protocol tensors a value is (metadata,
  decoding request tensors, encoding outputs).

Transports only move bytes and call facets; they never look at the Python type. A new
wire is one new facet per family; a new family is one module.

Decoding may need something of the request (where an upload goes, a server limit,
whether a request or a reply is read): it is handed in as a `Scope`, never read from
ambient state, so codecs stay a leaf that imports nothing of the server.
"""

from __future__ import annotations

import functools
import re
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import TypeAdapter
from pydantic_core import SchemaSerializer

from .finite import checked_json, output_serializer, refuse_nonfinite_output

#: Where JSON an output serializer wrote may hide a non-finite float: a bare NaN or
#: Infinity token (refused), or, from a model of the user's with its own config, `null`
#: (the value is walked then).
_SUSPECT_WORDS = re.compile(rb"NaN|Infinity").search
_SUSPECT_UNCHECKED = re.compile(rb"NaN|Infinity|null").search

if TYPE_CHECKING:
    from .http_facet import HttpFacet
    from .proto_facet import ProtoFacet
    from .v2_facet import V2Facet


class _Missing:
    """Marks a field the sender left out (distinct from an explicit None)."""

    _instance: ClassVar[_Missing | None] = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


class Scope(Protocol):
    """What decoding one value may use of its request (`tensorwire.Context` is one).

    `reading_request` tells a server reading a request (where an empty repeated field
    with a default reads as "not sent") from anyone reading a reply; `temp_dir` is
    where uploaded files are written; `limits` holds server limits (max image pixels);
    `state` is where an upload's client-side facts are kept for the method.
    """

    @property
    def reading_request(self) -> bool: ...

    @property
    def temp_dir(self) -> Path: ...

    @property
    def limits(self) -> Mapping[str, Any]: ...

    @property
    def state(self) -> dict[str, Any]: ...


class ReplyScope:
    """Reading a reply, or a value outside any request (clients, tools, tests).

    Files go to a fresh private directory each, owned by the caller as a download
    would be; nothing is remembered; no server limits apply.
    """

    reading_request = False
    limits: Mapping[str, Any] = {}

    @property
    def temp_dir(self) -> Path:
        return Path(tempfile.mkdtemp(prefix="tensorwire-file-"))

    @property
    def state(self) -> dict[str, Any]:
        return {}


REPLY: Scope = ReplyScope()


class Batching(Protocol):
    """How values of a family merge along a batch dimension and split back."""

    def size(self, value: Any, dim: int) -> int:
        """How many items `value` holds along `dim`."""
        ...

    def concat(self, values: list[Any], dim: int) -> Any:
        """One value holding all of `values`, stacked along `dim`."""
        ...

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        """`value` cut along `dim` into pieces of `sizes` items (views where possible)."""
        ...


class Codec:
    """The core of every codec; each concrete codec sets its `http` and `proto` facets.

    Flags a codec may have to compute (a model learns what its fields hold only once
    they resolve, and a wrapper answers from what it wraps) are read-only properties
    here; a codec overrides them with a class attribute or a property, never by
    assigning over them.
    """

    #: The HTTP facet (set by every codec).
    http: HttpFacet
    #: The protobuf facet (set by every codec).
    proto: ProtoFacet
    #: The Open Inference Protocol facet (set by every codec; `v2_facet.V2Facet`, the
    #: JSON form in one BYTES element, where the family has no better form).
    v2: V2Facet
    #: How values merge for adaptive batching; None when they cannot.
    batch: Batching | None = None
    #: What `output_value` passes as it is (isinstance); () validates every value.
    output_types: type | tuple[type, ...] = ()
    #: Whether `output_value` is the rule `validates_output` and `output_types` state:
    #: a value of `output_types` (any value, where the codec validates none) is itself,
    #: any other is validated by `adapter`. Per-API encoders then apply the rule inline
    #: (and write a value of the field's own type unchecked); a codec whose
    #: `output_value` follows another rule (an Optional passes None) sets it False, and
    #: they call its `output_value`.
    output_checked_by_types: ClassVar[bool] = True

    @property
    def has_tensors(self) -> bool:
        """Whether values may be (or hold) device tensors the runtime moves to the host."""
        return False

    @property
    def is_container(self) -> bool:
        """Whether the value is a repeated or map field (it cannot nest in another)."""
        return False

    @property
    def unchecked_floats(self) -> bool:
        """Whether values may hold floats that pydantic's checks of the API's own schema
        do not reach (models of the user's, JSON values): the non-finite rule walks
        them (`codecs.finite`)."""
        return False

    @property
    def validates_output(self) -> bool:
        """Whether `output_value` validates a value not of `output_types` (the standard
        codecs); a family codec (tensors, files, images, frames) checks as it writes."""
        return False

    def __init__(self, python_type: Any, annotation: Any | None = None) -> None:
        self.python_type = python_type
        #: What the API's pydantic model declares for this value (constraints included).
        self.annotation = python_type if annotation is None else annotation

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.python_type!r})"

    @functools.cached_property
    def adapter(self) -> TypeAdapter[Any]:
        """A TypeAdapter for this annotation (outputs and root inputs use it)."""
        return TypeAdapter(self.annotation)

    @functools.cached_property
    def serializer(self) -> SchemaSerializer:
        """`adapter`'s serializer, writing a non-finite float as a bare JSON token (then
        refused) or, where the contract opts in, as "NaN" / "Infinity" (`codecs.finite`)."""
        return output_serializer(self.adapter)

    def dump_json(self, value: Any) -> bytes:
        """JSON of an output value (as `output_value` gave it); a NaN or infinity the
        contract does not allow is a server error, never `null`.

        The value is walked only when the JSON could hide one: a model of the user's
        writes it as `null` or, by its own config, as a "NaN" string.
        """
        data = self.serializer.to_json(value)
        if self._suspect_json(data) is None:
            return data
        return self._checked_json(value, data)

    def json_dumper(self) -> Callable[[Any], bytes]:
        """`dump_json(output_value(value))` as one function with this codec's facts
        bound (the serializer, which check applies, whether values are validated): what
        a compiled handler calls per request."""
        to_json, suspect, checked = (self.serializer.to_json, self._suspect_json,
                                     self._checked_json)
        if not self.output_checked_by_types:
            value_of = self.output_value

            def dump_any(value: Any) -> bytes:
                value = value_of(value)
                data = to_json(value)
                return data if suspect(data) is None else checked(value, data)

            return dump_any
        if not self.validates_output:

            def dump(value: Any) -> bytes:
                data = to_json(value)
                return data if suspect(data) is None else checked(value, data)

            return dump
        types, validate = self.output_types, self.adapter.validate_python

        def dump_validated(value: Any) -> bytes:
            if not isinstance(value, types):
                value = validate(value)
            data = to_json(value)
            return data if suspect(data) is None else checked(value, data)

        return dump_validated

    @functools.cached_property
    def _suspect_json(self) -> Callable[[bytes], object]:
        """One pass over the JSON for what could hide a non-finite float (three `in`
        scans cost 2.4x this regex on a small answer)."""
        return _SUSPECT_UNCHECKED if self.unchecked_floats else _SUSPECT_WORDS

    def _checked_json(self, value: Any, data: bytes) -> bytes:
        """`data` once the suspect search hit: refused if it holds a non-finite float."""
        words = b"NaN" in data or b"Infinity" in data
        if self.unchecked_floats and (words or b"null" in data):
            refuse_nonfinite_output(value, writing_json=True)
        return checked_json(data) if words else data

    def output_value(self, value: Any) -> Any:
        """An output value as every wire writes it.

        A value already of the declared type is itself (the hot path: one isinstance
        check); any other is validated through `adapter`, so a dict for a model gets its
        defaults filled the same on HTTP and gRPC, and a value of the wrong type raises
        (a server error: 500 / INTERNAL) instead of being sent as it came.
        """
        if not self.validates_output or isinstance(value, self.output_types):
            return value
        return self.adapter.validate_python(value)

    def iter_tensors(self, value: Any) -> list[Any]:
        """Device tensors inside `value`, for the one batched device→host transfer."""
        return []


def instances_of(python_type: Any) -> Any:
    """What `output_value` passes unchecked for a type: its instances if it is a plain
    class, else nothing (a Literal or a generic alias validates every value)."""
    return python_type if isinstance(python_type, type) else ()
