"""The tensor codec: `np.ndarray`, `torch.Tensor`, `tf.Tensor` on every wire.

One `TensorCodec` per annotation carries a `TensorSpec` (framework, `Shape`, `DType`)
and applies it through one pydantic core schema, so every wire form and framework is
validated by the same code:

- JSON mode (JSON bodies and JSON multipart parts) gets nested lists, or a bare value
  for rank 0 (`jsonarray`);
- Python mode gets the arrays that the binary decoders made (`tensorwire.v1.Tensor`
  via `prototensor`, `.npy` bodies and parts via `npy`) or whatever user code passes:
  a tensor of any of the three frameworks, NumPy scalars, nested lists.

A value of the declared framework is checked in place (shape and dtype are metadata:
no copy); one from elsewhere goes through NumPy. Outputs are encoded from NumPy: JSON,
`.npy` when the request's Accept prefers `application/x-npy`, or a Tensor message; an
output is held to its declared dtype and shape too (a mismatch is the service's bug).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

import numpy as np
from pydantic_core import PydanticCustomError
from pydantic_core import core_schema as cs

from .. import v1
from ..validators import ContentType, DataframeSchema, DType, FieldNumber, Shape
from ..wire import dtypes, npy
from ..wire import tensors as prototensor
from ..wire.dtypes import DTypeSpec
from ..wire.field_error import FieldError
from . import jsonarray
from .core import MISSING, Codec, Scope
from .frameworks import NUMPY, TENSORFLOW, TORCH, Framework, framework_of
from .http_facet import HttpBody, HttpFacet, JsonText, Part, UnsupportedBody, is_json_media
from .markers import CodecMarker
from .proto_facet import MessageProto, ProtoBuilder, ProtoType
from .tensorspec import TensorSpec, element_schema, example, format_shape
from .v2_facet import ANY_DATATYPE, Tensor, TensorMeta, V2Facet, oip_datatype

_ACCEPTED_BODIES = "application/json or application/x-npy"
#: A `.npy` answer of at least this many bytes is written from the array's memory
#: after its header; a smaller one is joined and sent in one write.
STREAMED = 1 << 16


class TensorSchema(CodecMarker):
    """The pydantic face of a tensor codec (the metadata of its annotation)."""

    def __init__(self, codec: TensorCodec) -> None:
        self.codec = codec

    def __repr__(self) -> str:
        return f"TensorSchema({self.codec.spec.describe()})"

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        codec = self.codec
        return cs.json_or_python_schema(
            json_schema=cs.no_info_plain_validator_function(codec.validate_json),
            python_schema=cs.no_info_plain_validator_function(codec.validate_python),
            serialization=cs.plain_serializer_function_ser_schema(
                codec.serialize, info_arg=True, when_used="always"),
        )

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        return self.codec.json_schema()


def _pydantic_error(exc: FieldError) -> Exception:
    return PydanticCustomError(exc.type, "{msg}", {"msg": exc.msg})


class TensorCodec(Codec):
    """A tensor of one framework: nested lists in JSON, `tensorwire.v1.Tensor` in gRPC."""

    #: Any tensor output may be (or hold) a CUDA torch tensor: the runtime asks.
    has_tensors = True

    def __init__(self, python_type: Any, spec: TensorSpec, metadata: tuple[Any, ...] = ()
                 ) -> None:
        self.spec = spec
        base = get_origin(python_type) or python_type
        super().__init__(python_type, Annotated[(base, TensorSchema(self), *metadata)])
        self.http = TensorHttp(self, binary_media=(npy.NPY,))
        self.proto = TensorProto(self, "tensorwire.v1.Tensor")
        self.v2 = TensorV2(self)
        self.batch = TensorBatching(spec)

    def __repr__(self) -> str:
        return f"TensorCodec({self.spec.describe()})"

    # ----------------------------------------------------------------- validation
    def validate_json(self, value: Any) -> Any:
        try:
            return self.spec.framework.from_numpy(self._from_json(value))
        except FieldError as exc:
            raise _pydantic_error(exc) from None

    def validate_python(self, value: Any) -> Any:
        spec = self.spec
        fw = framework_of(value)
        try:
            if fw is spec.framework:
                spec.check(fw.shape(value), *fw.dtype_facts(value))
                return value if fw is not NUMPY else np.asarray(value)
            if fw is not None:
                array = fw.to_numpy(value)
                self._check(array)
                return spec.framework.from_numpy(array)
            if isinstance(value, list | tuple | bool | int | float | str):
                return spec.framework.from_numpy(self._from_json(value))
        except FieldError as exc:
            raise _pydantic_error(exc) from None
        raise PydanticCustomError(
            "tensor_type", "{msg}",
            {"msg": f"expected {spec.framework.label}, nested lists or a number, "
                    f"got {type(value).__name__}"})

    def _from_json(self, value: Any) -> np.ndarray:
        array = self.spec.fit_empty(jsonarray.from_json(value, self.spec.dtype))
        self._check(array)
        return array

    def _check(self, array: np.ndarray) -> None:
        if array.dtype.hasobject:
            raise FieldError("object arrays are not tensors", type="tensor_dtype")
        self.spec.check(array.shape, *dtypes.numpy_facts(array.dtype))

    def to_numpy(self, value: Any) -> np.ndarray:
        """An output (or client-side input) as a NumPy array held to the declaration."""
        fw = framework_of(value)
        if fw is not None:
            array = fw.to_numpy(value)
        elif isinstance(value, list | tuple | bool | int | float | str):
            array = jsonarray.from_json(value, self.spec.dtype)
        else:
            raise FieldError(f"expected {self.spec.framework.label}, got "
                             f"{type(value).__name__}", type="tensor_type")
        self._check(array)
        return array

    def serialize(self, value: Any, info: Any) -> Any:
        if info.mode_is_json():
            return jsonarray.to_json(self.to_numpy(value))
        return value

    def json_schema(self) -> dict[str, Any]:
        spec = self.spec
        schema: dict[str, Any] = {"type": "array", "format": spec.framework.format}
        element = element_schema(spec.dtype)
        if spec.shape is not None:
            nested = element
            for dim in reversed(spec.shape.dims):
                nested = {"type": "array", "items": nested}
                if dim != -1:
                    nested["minItems"] = nested["maxItems"] = dim
            if not spec.shape.dims:  # rank 0: the bare element
                nested = dict(element)
            schema = {**nested, "format": spec.framework.format}
        if spec.dtype is not None:
            schema["dtype"] = spec.dtype.name
        if spec.shape is not None:
            schema["shape"] = list(spec.shape.dims)
        # A Field(examples=...) of the parameter replaces this one.
        schema["examples"] = [example(spec)]
        return schema

    # ----------------------------------------------------------------- device transfer
    def iter_tensors(self, value: Any) -> list[Any]:
        return [value] if TORCH.is_device_tensor(value) else []


class TensorProto(MessageProto):
    """A `tensorwire.v1.Tensor` whose `data` bypasses the protobuf runtime."""

    codec: TensorCodec

    def __init__(self, codec: TensorCodec, type_name: str) -> None:
        super().__init__(codec, type_name)
        self.raw_bytes_field = "data"

    def proto_type(self, builder: ProtoBuilder, name_hint: str) -> ProtoType:
        """The Tensor message, with the declared dtype and shape as field options: a
        reflection-driven client converts its inputs to the dtype, as JSON does."""
        spec = self.codec.spec
        options = b""
        if spec.dtype is not None or spec.shape is not None:
            options = v1.tensor_field_options(
                spec.dtype.name if spec.dtype is not None else None,
                spec.shape.dims if spec.shape is not None else None)
        assert self.type_name is not None
        return ProtoType.message(builder.well_known(self.type_name), options)

    def from_proto(self, raw: Any, scope: Scope) -> Any:
        return prototensor.to_numpy(raw)

    def fill(self, value: Any, msg: Any) -> None:
        prototensor.fill(self.codec.to_numpy(value), msg)

    def fill_split(self, value: Any, msg: Any) -> Any | None:
        msg.SetInParent()
        return prototensor.fill(self.codec.to_numpy(value), msg, split=True)

    def from_split(self, raw: Any, data: Any, scope: Scope) -> Any:
        return prototensor.to_numpy(raw, data=data)


class TensorV2(V2Facet):
    """The tensor itself: datatype from `DType`, shape from `Shape` (-1 for a free
    dimension; [-1] when no Shape is declared, ANY_DATATYPE when no DType is).

    The request's array is handed to pydantic as it is (a view of the received bytes),
    so dtype and shape are checked by the same `TensorSpec.check` as on every other
    wire; BYTES elements become a NumPy string array for a `string` tensor.
    """

    elementwise = False
    codec: TensorCodec

    def __init__(self, codec: TensorCodec) -> None:
        super().__init__(codec, None)
        spec = codec.spec
        self._datatype = oip_datatype(spec.dtype)
        self.shape = spec.shape.dims if spec.shape is not None else (-1,)

    @property
    def datatype(self) -> str:  # type: ignore[override]
        return self._datatype or ANY_DATATYPE

    @property
    def unsupported(self) -> str | None:
        if self._datatype is None:
            return (f"{self.codec.spec.dtype} tensors have no Open Inference Protocol "
                    "datatype")
        return None

    def tensors(self, name: str) -> list[TensorMeta]:
        return [TensorMeta(name, self.datatype, self.shape)]

    def decode(self, name: str, inputs: Any, scope: Scope) -> Any:
        array = inputs[name].array
        if array.dtype == object:  # BYTES
            declared = self.codec.spec.dtype
            if declared is not None and not declared.is_string:
                raise FieldError(f"expected dtype {declared.name}, got BYTES",
                                 type="tensor_dtype")
            return _strings(array)
        return array

    def encode(self, name: str, value: Any) -> list[Tensor]:
        return [Tensor(name, self.codec.to_numpy(value))]


def _strings(array: np.ndarray) -> np.ndarray:
    """BYTES elements as a NumPy unicode array (the form of `string` tensors)."""
    flat = []
    for item in array.reshape(-1):
        try:
            flat.append(item.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise FieldError(f"a BYTES element is not UTF-8 text: {exc.reason}",
                             type="tensor_dtype") from None
    return np.array(flat, dtype=str).reshape(array.shape)


class TensorHttp(HttpFacet):
    """Nested lists in JSON, or an `.npy` body or part; `.npy` out when Accept asks."""

    codec: TensorCodec
    json_answer = False  # `.npy` when Accept asks

    async def _read_npy(self, part: Part) -> Any:
        """The array of a `.npy` body or part: read as it arrives, straight into its
        buffer, where the part says how much it may hold (`bound`); gathered within
        the limits and read whole otherwise (a chunked or compressed body)."""
        if part.bound is None:
            return npy.read(await part.read(), self.codec.spec.dtype)
        return await npy.read_from(part, self.codec.spec.dtype)

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        media = body.media_type
        if media == npy.NPY:
            return await self._read_npy(body)
        if media is None or is_json_media(media):
            data = await body.read()
            return JsonText(data) if data.strip() else MISSING
        raise UnsupportedBody(media, _ACCEPTED_BODIES)

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        if part.media_type == npy.NPY:
            return await self._read_npy(part)
        if part.media_type in (None, "text/plain") or is_json_media(part.media_type):
            return JsonText(await part.read())
        raise UnsupportedBody(part.media_type, _ACCEPTED_BODIES)

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        array = self.codec.to_numpy(value)
        if npy.wants(accept):
            head, data = npy.write_parts(array)
            if data.nbytes < STREAMED:
                return HttpBody(b"".join((head, data)), npy.NPY)
            # the header, then the array's own memory: no `tobytes`, no join
            return HttpBody(_pieces(head, data), npy.NPY, length=len(head) + data.nbytes)
        text = jsonarray.dumps(array)
        if text is None:  # NaN/inf, complex, strings, rank 0: the general path
            text = self.codec.adapter.dump_json(array)
        return HttpBody(text, "application/json")


async def _pieces(*pieces: bytes | memoryview) -> AsyncIterator[bytes | memoryview]:
    """An answer's pieces for the transport to write one after another."""
    for piece in pieces:
        yield piece


class TensorBatching:
    """Tensors batch along any dimension, in their own framework (views on split)."""

    def __init__(self, spec: TensorSpec) -> None:
        self.spec = spec

    def _framework(self, value: Any) -> Framework:
        fw = framework_of(value)
        if fw is None:
            raise FieldError(f"expected {self.spec.describe()}, got {type(value).__name__}")
        return fw

    def size(self, value: Any, dim: int) -> int:
        shape = self._framework(value).shape(value)
        if not -len(shape) <= dim < len(shape):
            raise FieldError(f"a tensor of shape {format_shape(shape)} has no batch "
                             f"dimension {dim}", type="batch_dim")
        return shape[dim]

    def concat(self, values: list[Any], dim: int) -> Any:
        return self._framework(values[0]).concat(values, dim)

    def split(self, value: Any, sizes: list[int], dim: int) -> list[Any]:
        return self._framework(value).split(value, sizes, dim)


# ---------------------------------------------------------------------- building


def build_numpy(base: Any, metadata: tuple[Any, ...], annotation: Any) -> TensorCodec:
    return _build(NUMPY, base, metadata)


def build_torch(base: Any, metadata: tuple[Any, ...], annotation: Any) -> TensorCodec:
    return _build(TORCH, base, metadata)


def build_tensorflow(base: Any, metadata: tuple[Any, ...], annotation: Any) -> TensorCodec:
    return _build(TENSORFLOW, base, metadata)


def _build(fw: Framework, base: Any, metadata: tuple[Any, ...]) -> TensorCodec:
    shape: Shape | None = None
    dtype: DTypeSpec | None = None
    rest: list[Any] = []
    for m in metadata:
        if isinstance(m, Shape):
            if shape is not None and shape != m:
                raise TypeError(f"two different shapes {shape} and {m}")
            shape = m
        elif isinstance(m, DType):
            try:
                spec = dtypes.resolve(m.name)
            except ValueError as exc:
                raise TypeError(str(exc)) from None
            if dtype is not None and dtype is not spec:
                raise TypeError(f"two different dtypes {dtype} and {spec}")
            dtype = spec
        elif isinstance(m, ContentType | DataframeSchema):
            raise TypeError(f"{type(m).__name__} does not apply to {fw.label}")
        elif not isinstance(m, FieldNumber):
            rest.append(m)
    typed_shape, typed_dtype = _numpy_type_args(base) if fw is NUMPY else (None, None)
    if typed_shape is not None:
        if shape is not None and len(shape.dims) != len(typed_shape.dims):
            raise TypeError(f"Shape{shape} disagrees with the annotation's rank "
                            f"{len(typed_shape.dims)}")
        shape = shape or typed_shape
    if typed_dtype is not None:
        if dtype is not None and dtype is not typed_dtype:
            raise TypeError(f"DType({dtype.name!r}) disagrees with the annotation's "
                            f"{typed_dtype.name}")
        dtype = typed_dtype
    if dtype is not None and not fw.supports(dtype):
        if fw is NUMPY:
            raise TypeError("bfloat16 NumPy arrays need the ml_dtypes package")
        raise TypeError(f"{fw.label} cannot hold {dtype.name} elements")
    return TensorCodec(base, TensorSpec(fw, shape, dtype), tuple(rest))


def _numpy_type_args(base: Any) -> tuple[Shape | None, DTypeSpec | None]:
    """`np.ndarray[tuple[int, int], np.dtype[np.float16]]` -> (Shape((-1, -1)), float16)."""
    args = get_args(base)
    if len(args) != 2:
        return None, None
    shape_arg, dtype_arg = args
    return _typed_shape(shape_arg), _typed_dtype(dtype_arg)


def _typed_shape(arg: Any) -> Shape | None:
    if get_origin(arg) is not tuple:
        return None
    items = get_args(arg)
    if len(items) == 2 and items[1] is Ellipsis:
        return None
    if items == ((),):  # tuple[()] spelled the old way
        items = ()
    dims = []
    for item in items:
        if get_origin(item) is Literal and len(get_args(item)) == 1:
            dims.append(int(get_args(item)[0]))
        else:
            dims.append(-1)
    return Shape(dims)


def _typed_dtype(arg: Any) -> DTypeSpec | None:
    if get_origin(arg) is not np.dtype:
        return None
    (scalar,) = get_args(arg) or (Any,)
    if scalar is Any or isinstance(scalar, TypeVar):
        return None
    try:
        spec = dtypes.from_numpy(np.dtype(scalar))
    except TypeError:
        spec = None
    if spec is None:
        raise TypeError(f"np.dtype[{getattr(scalar, '__name__', scalar)}] is not a concrete "
                        f"tensor dtype; use one of {', '.join(d.name for d in dtypes.TABLE)}")
    return spec
