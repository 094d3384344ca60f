"""The Open Inference Protocol (KServe v2) facet of a codec: the tensors a value is.

The protocol has nothing but named tensors (a datatype, a shape, elements) with optional
parameters, so every value maps onto one or more of them. The base facet here is a
value's JSON form in one BYTES element of shape [1], tagged `content_type:
application/json` (as MLServer tags JSON): models, dicts, `Any`, unions and nested lists
travel so, and are validated from that text by their own pydantic schema. Families with
a better form subclass it in their own module:

- one value is one element (`elementwise`): int, float, bool are INT64 / FP64 / BOOL of
  shape [1], str and bytes BYTES, files and images BYTES with a `content_type`; a list
  of such values is one tensor of shape [-1] (containers);
- a tensor is itself: datatype from `DType`, shape from `Shape` (-1 for free dims);
- a DataFrame is one tensor per column, as MLServer's pandas codec sends it;
- an API's model or dict output is one output per field or key (`encode_outputs`).

A facet that cannot carry its values says why (`unsupported`); the v2 transport lists
such an API with the reason and refuses to infer on it.

Decoding gets `Tensor`s the transport already turned into arrays (the wire helpers of
`tensorwire.wire.oip` check sizes and types) and returns what the API's pydantic model
validates: a Python value, an array, or `JsonText`. Encoding returns `Tensor`s the
transport writes in whichever form the client asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import numpy as np

from ..wire import dtypes
from ..wire.field_error import FieldError
from .http_facet import JSON, JsonText

if TYPE_CHECKING:
    from .core import Codec, Scope

#: The name of an API's one output when it is not a model (or dict) of several.
RESULT: Final = "result"
#: The tensor parameter that says what a BYTES element holds.
CONTENT_TYPE: Final = "content_type"
#: Metadata's datatype for a tensor that accepts any element type (no `DType`).
ANY_DATATYPE: Final = ""
_NO_PARAMETERS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TensorMeta:
    """One input or output as model metadata lists it (-1: a free dimension)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "datatype": self.datatype,
                               "shape": list(self.shape)}
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        return out


class Tensor(NamedTuple):
    """One request input or response output: its name, its array, its parameters.

    A tuple: one is made per tensor of every request, and a frozen dataclass costs
    about a microsecond more to build.
    """

    name: str
    array: np.ndarray
    parameters: Mapping[str, Any] = _NO_PARAMETERS


_OIP_PREFIX: Final = {"uint": "UINT", "int": "INT", "float": "FP"}


def oip_datatype(spec: dtypes.DTypeSpec | None) -> str | None:
    """The OIP datatype of a tensorwire dtype, by the protocol's naming rule (kind and
    bits: float32 is FP32, uint8 UINT8), bfloat16 BF16, strings BYTES; None for types
    the protocol has not (complex), ANY_DATATYPE for an undeclared one.

    A rule rather than a lookup in `tensorwire.wire.oip`, which `import tensorwire`
    must not load (a unit test checks the two agree for every dtype).
    """
    if spec is None:
        return ANY_DATATYPE
    if spec.is_string:
        return "BYTES"
    if spec.kind == "bool":
        return "BOOL"
    if spec is dtypes.BFLOAT16:
        return "BF16"
    prefix = _OIP_PREFIX.get(spec.kind)
    return None if prefix is None else f"{prefix}{spec.itemsize * 8}"


def describe(item: Any) -> str:
    """What a client sent as one element, for error messages."""
    if isinstance(item, bytes):
        return "a BYTES element"
    return f"a {np.asarray(item).dtype} element"


def text_of(item: bytes) -> str:
    """A BYTES element as text; FieldError unless it is UTF-8."""
    try:
        return item.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError(f"a BYTES element is not UTF-8 text: {exc.reason}",
                         type="v2_bytes") from None


def one_element(tensor: Tensor) -> Any:
    """The only element of a tensor that carries one value (shape [1], or [] or [1, 1])."""
    array = tensor.array
    if array.size != 1:
        raise FieldError(f"expects one element (shape [1]), got shape {list(array.shape)}",
                         type="v2_shape")
    return array.reshape(-1)[0]


def elements(tensor: Tensor) -> np.ndarray:
    """The elements of a tensor that carries a list: rank 1 (shape [n])."""
    array = tensor.array
    if array.ndim != 1:
        raise FieldError(f"expects a list: shape [n], got shape {list(array.shape)}",
                         type="v2_shape")
    return array


class V2Facet:
    """How one codec's values travel as OIP tensors; this base is JSON in one BYTES
    element (`content_type: application/json`)."""

    #: Whether one value is one element of a tensor, so that a list of values is one
    #: tensor of shape [-1] (see `containers.ListV2`).
    elementwise: bool = True
    #: The OIP datatype of one element.
    datatype: str = "BYTES"
    #: NumPy dtype of an array of encoded elements (object: BYTES elements).
    element_dtype: Any = object

    def __init__(self, codec: Codec, content_type: str | None = JSON) -> None:
        self.codec = codec
        #: What one BYTES element holds (metadata and response parameters).
        self.content_type = content_type

    # ---------------------------------------------------------------- metadata
    @property
    def unsupported(self) -> str | None:
        """Why a value of this codec has no OIP form (None: it has one)."""
        if self.codec.http.is_file:
            return "it holds files or images, which have no JSON form"
        return None

    @property
    def output_unsupported(self) -> str | None:
        """Why an API's whole output of this codec has no OIP form."""
        return self.unsupported

    @property
    def parameters(self) -> Mapping[str, Any]:
        return {CONTENT_TYPE: self.content_type} if self.content_type else _NO_PARAMETERS

    def tensors(self, name: str) -> list[TensorMeta]:
        """The tensors a value named `name` is, as metadata lists them."""
        return [TensorMeta(name, self.datatype, (1,), self.parameters)]

    def input_names(self, name: str) -> tuple[str, ...] | None:
        """The request inputs a value named `name` reads; None: every input that no
        other field reads (a DataFrame whose columns are not declared)."""
        return (name,)

    def output_tensors(self) -> list[TensorMeta]:
        """The outputs of an API whose whole output is of this codec."""
        return self.tensors(RESULT)

    # ---------------------------------------------------------------- decoding
    def decode(self, name: str, inputs: Mapping[str, Tensor], scope: Scope) -> Any:
        """The value for pydantic from the inputs this value reads (all present)."""
        tensor = inputs[name]
        return self.from_element(one_element(tensor), tensor.parameters, scope)

    def from_element(self, item: Any, parameters: Mapping[str, Any], scope: Scope) -> Any:
        """One value from one element: bytes for BYTES, a NumPy scalar otherwise."""
        if isinstance(item, bytes):
            return JsonText(item)
        return item.item()  # a number where JSON was expected: pydantic decides

    # ---------------------------------------------------------------- encoding
    def to_element(self, value: Any) -> Any:
        """One value as one element of `element_dtype`."""
        codec = self.codec
        return codec.adapter.dump_json(codec.output_value(value))

    def encode_elements(self, values: Sequence[Any]) -> tuple[np.ndarray, Mapping[str, Any]]:
        """A rank-1 array of encoded values, and the parameters that describe them."""
        items = [self.to_element(v) for v in values]
        if self.element_dtype is object:
            array = np.empty(len(items), dtype=object)
            array[:] = items
        else:
            array = np.array(items, dtype=self.element_dtype)
        return array, self.parameters

    def encode(self, name: str, value: Any) -> list[Tensor]:
        """The tensors of one value named `name` (none for an absent optional value)."""
        array, parameters = self.encode_elements([value])
        return [Tensor(name, array, parameters)]

    def encode_outputs(self, value: Any) -> list[Tensor]:
        """An API's whole output: one `result` unless the family knows better."""
        return self.encode(RESULT, value)


class MediaV2(V2Facet):
    """One BYTES element per value holding a binary of some media type (bytes with a
    ContentType, files, images): outputs carry the media type as `content_type` when
    every element of the tensor has the same one."""

    @property
    def unsupported(self) -> str | None:
        return None

    def media_element(self, value: Any) -> tuple[bytes, str | None]:
        """One value's bytes and media type."""
        raise NotImplementedError

    def encode_elements(self, values: Sequence[Any]) -> tuple[np.ndarray, Mapping[str, Any]]:
        array = np.empty(len(values), dtype=object)
        media: set[str | None] = set()
        for i, value in enumerate(values):
            array[i], kind = self.media_element(value)
            media.add(kind)
        (only,) = media if len(media) == 1 else (None,)
        return array, ({CONTENT_TYPE: only} if only else _NO_PARAMETERS)

    @staticmethod
    def claimed(parameters: Mapping[str, Any]) -> str | None:
        """The media type the client named for a BYTES input (`content_type`)."""
        value = parameters.get(CONTENT_TYPE)
        return value if isinstance(value, str) and value else None

    @staticmethod
    def content(item: Any) -> bytes:
        if not isinstance(item, bytes):
            raise FieldError(f"expects BYTES (the content), got {describe(item)}",
                             type="v2_datatype")
        return item


class UnsupportedV2(V2Facet):
    """A value with no OIP form; `reason` says why."""

    def __init__(self, codec: Codec, reason: str) -> None:
        super().__init__(codec, None)
        self.reason = reason

    @property
    def unsupported(self) -> str | None:
        return self.reason


class NumberV2(V2Facet):
    """int, float, bool: one INT64 / FP64 / BOOL element; a list of them is [-1].

    A BYTES element is read as text, so pydantic's lax rules apply as for a JSON
    string ("3" is 3); a number of another width is its Python value.
    """

    _KINDS: Final[dict[type, tuple[str, Any]]] = {
        bool: ("BOOL", np.bool_), int: ("INT64", np.int64), float: ("FP64", np.float64)}

    def __init__(self, codec: Codec, base: type) -> None:
        super().__init__(codec, None)
        self.datatype, self.element_dtype = self._KINDS[base]

    @property
    def unsupported(self) -> str | None:
        return None

    def from_element(self, item: Any, parameters: Mapping[str, Any], scope: Scope) -> Any:
        if isinstance(item, bytes):
            return text_of(item)
        return item.item()

    def to_element(self, value: Any) -> Any:
        return self.codec.output_value(value)


class TextV2(V2Facet):
    """A value written as text: one BYTES element holding UTF-8 (str, enums of strings,
    dates, UUIDs, datetimes: their JSON string form, without the quotes)."""

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec, None)

    @property
    def unsupported(self) -> str | None:
        return None

    def from_element(self, item: Any, parameters: Mapping[str, Any], scope: Scope) -> Any:
        if isinstance(item, bytes):
            return text_of(item)
        return item.item()

    def to_element(self, value: Any) -> Any:
        codec = self.codec
        text = codec.adapter.dump_python(codec.output_value(value), mode="json",
                                         warnings=False)
        return str(text).encode("utf-8")
