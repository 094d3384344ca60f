"""Open Inference Protocol (KServe v2) tensors on the wire: pure helpers, no transport.

Everything here turns protocol bytes and JSON values into NumPy arrays and back, and
checks them, so that the HTTP (`/v2/...`) and gRPC (`inference.GRPCInferenceService`)
transports only move bytes. Nothing here imports aiohttp, grpc, pydantic or protobuf:
gRPC messages are read and written duck-typed (the `tensorwire.inference` classes,
tritonclient's or any other compiled `inference` proto fit).

Four representations of one tensor, each with a pair of functions:

- raw bytes (gRPC `raw_input_contents` / `raw_output_contents`, the HTTP binary
  extension): `array_from_raw` / `raw_from_array`;
- typed `InferTensorContents` fields: `array_from_contents` / `contents_from_array`;
- KServe v2 JSON `data`: `array_from_json` / `json_from_array`;
- whole HTTP bodies with Triton's binary extension: `parse_http_infer_request` /
  `build_http_infer_response`; whole gRPC messages: `arrays_from_infer_request` /
  `fill_infer_response`.

Guarantees, for hostile input: no allocation is sized by a client's claim. A shape is
checked (integers, none negative, rank at most `MAX_RANK`, element span addressable)
and prod(shape) x itemsize is compared with the bytes actually received before any
array exists; BYTES element counts are bounded by the bytes received (each element needs
its 4-byte length) before the object array is made. Every violation raises `OIPError`,
an `InvalidArgument` (HTTP 400 / gRPC INVALID_ARGUMENT) whose message names the tensor.
Raw arrays are zero-copy `frombuffer` views of the received buffer: read-only when the
buffer is, and possibly unaligned when they sit at an odd offset of an HTTP body (NumPy
and torch handle both; a consumer that must write copies once).

Encoding raises `TypeError` for arrays the protocol cannot carry (complex, datetime,
objects that are not str/bytes): that is the server's own output, not the client's
fault. The wire is little-endian; BYTES elements are a 4-byte little-endian length
followed by the bytes; BF16 is `ml_dtypes.bfloat16` (imported on first use; the
same two bytes tritonclient sends, its older float32 truncation included).
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np
import orjson

from ..errors import InvalidArgument, Unimplemented

#: The HTTP header giving the length of the JSON header of a binary-extension body.
INFERENCE_HEADER_CONTENT_LENGTH: Final = "Inference-Header-Content-Length"
#: What a server that speaks the binary extension lists in `/v2` `extensions`.
BINARY_EXTENSION: Final = "binary_tensor_data"
#: NumPy's own limit on the number of dimensions (as `tensorwire.v1` tensors).
MAX_RANK: Final = 64
#: The largest byte span NumPy can address (an intp): no shape may describe more,
#: even a shape with a zero dimension.
_MAX_SPAN: Final = int(np.iinfo(np.intp).max)
#: A BYTES element's length prefix: 4 bytes, little-endian, unsigned.
_LENGTH = struct.Struct("<I")
_MAX_ELEMENT: Final = 0xFFFFFFFF
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX: Final = 2**64 - 1

Kind = Literal["bool", "uint", "int", "float", "bytes"]


class OIPError(InvalidArgument):
    """The request breaks the Open Inference Protocol.

    One type for every protocol violation; the message names the tensor (or the part
    of the body) at fault, and `detail` carries it as a `loc` for tensorwire's clients.
    """

    @classmethod
    def tensor(cls, name: str, msg: str) -> OIPError:
        """A violation in one tensor: `input 'x': <msg>`."""
        return cls(f"input {name!r}: {msg}",
                   detail=[{"loc": ["inputs", name], "msg": msg, "type": "value_error"}])

    @classmethod
    def output(cls, name: str, msg: str) -> OIPError:
        """An output that cannot be sent the way the client asked: `output 'y': <msg>`."""
        return cls(f"output {name!r}: {msg}",
                   detail=[{"loc": ["outputs", name], "msg": msg, "type": "value_error"}])

    @classmethod
    def body(cls, msg: str) -> OIPError:
        """A violation of the request as a whole (its framing, its JSON header)."""
        return cls(msg, detail=[{"loc": [], "msg": msg, "type": "value_error"}])


# --- the datatype table -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Datatype:
    """One OIP element type under every name the wire gives it."""

    #: The OIP name ("FP32").
    name: str
    kind: Kind
    #: Bytes per element in raw form; 0 for BYTES (each element is length + bytes).
    itemsize: int
    #: The NumPy dtype name: "bfloat16" is ml_dtypes', "object" holds BYTES elements.
    numpy_name: str
    #: The `InferTensorContents` field that carries it; None for FP16 and BF16 (raw only).
    contents_field: str | None

    def numpy_dtype(self) -> np.dtype[Any]:
        """The little-endian NumPy dtype of the elements (BF16 needs ml_dtypes)."""
        if self.name == "BF16":
            return _bfloat16()
        if self.name == "BYTES":
            return np.dtype(object)
        return np.dtype(self.numpy_name).newbyteorder("<")

    def __str__(self) -> str:
        return self.name


DATATYPES: Final[dict[str, Datatype]] = {d.name: d for d in (
    Datatype("BOOL", "bool", 1, "bool", "bool_contents"),
    Datatype("UINT8", "uint", 1, "uint8", "uint_contents"),
    Datatype("UINT16", "uint", 2, "uint16", "uint_contents"),
    Datatype("UINT32", "uint", 4, "uint32", "uint_contents"),
    Datatype("UINT64", "uint", 8, "uint64", "uint64_contents"),
    Datatype("INT8", "int", 1, "int8", "int_contents"),
    Datatype("INT16", "int", 2, "int16", "int_contents"),
    Datatype("INT32", "int", 4, "int32", "int_contents"),
    Datatype("INT64", "int", 8, "int64", "int64_contents"),
    Datatype("FP16", "float", 2, "float16", None),
    Datatype("BF16", "float", 2, "bfloat16", None),
    Datatype("FP32", "float", 4, "float32", "fp32_contents"),
    Datatype("FP64", "float", 8, "float64", "fp64_contents"),
    Datatype("BYTES", "bytes", 0, "object", "bytes_contents"),
)}
BYTES: Final = DATATYPES["BYTES"]

#: Every `InferTensorContents` field, and the NumPy type its repeated values have.
CONTENTS_FIELDS: Final[dict[str, str]] = {
    "bool_contents": "bool", "int_contents": "int32", "int64_contents": "int64",
    "uint_contents": "uint32", "uint64_contents": "uint64", "fp32_contents": "float32",
    "fp64_contents": "float64", "bytes_contents": "object",
}

_BY_NUMPY: Final[dict[str, Datatype]] = {
    d.numpy_name: d for d in DATATYPES.values() if d.kind != "bytes"}


def _bfloat16() -> np.dtype[Any]:
    try:
        import ml_dtypes
    except ImportError as exc:  # an optional dependency (the `torch` extra brings it)
        raise Unimplemented("BF16 tensors need the ml_dtypes package on the server") from exc
    return np.dtype(ml_dtypes.bfloat16)


def datatype(name: str | Datatype, tensor: str) -> Datatype:
    """The datatype a client named for `tensor`; OIPError naming the known ones if none."""
    if isinstance(name, Datatype):
        return name
    found = DATATYPES.get(name) if isinstance(name, str) else None
    if found is None:
        raise OIPError.tensor(tensor, f"unknown datatype {name!r}; known: "
                                      f"{', '.join(DATATYPES)}")
    return found


def datatype_of(dtype: np.dtype[Any]) -> Datatype:
    """The datatype an array of `dtype` travels as: str/bytes/object arrays as BYTES.

    Raises TypeError for dtypes the protocol has no type for (complex, datetime, ...).
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return BYTES
    # ml_dtypes' bfloat16 is recognised by name, so this never imports ml_dtypes.
    found = _BY_NUMPY.get(dtype.name)
    if found is None or (dtype.kind == "V" and dtype.name != "bfloat16"):
        raise TypeError(f"NumPy dtype {dtype} has no Open Inference Protocol datatype")
    return found


# --- shapes -------------------------------------------------------------------------


def check_shape(shape: Any, name: str, dt: Datatype | None = None) -> tuple[int, ...]:
    """A client's shape as a tuple, refused unless every dim is a non-negative integer,
    the rank is at most MAX_RANK and the shape spans an addressable number of bytes
    (so that even a shape with a zero dim cannot make NumPy fail later)."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Iterable):
        raise OIPError.tensor(name, f"shape must be a list of integers, got {shape!r}")
    dims = tuple(shape)
    if len(dims) > MAX_RANK:
        raise OIPError.tensor(name, f"rank {len(dims)} exceeds the limit of {MAX_RANK}")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise OIPError.tensor(name, f"shape must be a list of integers, got {list(dims)}")
        if d < 0:
            raise OIPError.tensor(name, f"shape {list(dims)} has a negative dimension")
    dims = tuple(int(d) for d in dims)
    span = math.prod(max(d, 1) for d in dims) * (dt.itemsize if dt and dt.itemsize else 8)
    if span > _MAX_SPAN:
        raise OIPError.tensor(name, f"shape {list(dims)} is too large")
    return dims


# --- raw bytes ----------------------------------------------------------------------


def _byte_view(buf: Any) -> memoryview:
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def array_from_raw(buf: Any, datatype_name: str | Datatype, shape: Any,
                   name: str) -> np.ndarray:
    """The tensor that raw protocol bytes hold, as a zero-copy view of `buf`.

    `buf` is any bytes-like object (bytes, bytearray, a memoryview slice of a body).
    Fixed-size types: exactly prod(shape) x itemsize bytes, little-endian, row-major;
    BOOL bytes must be 0 or 1. BYTES: each element a 4-byte little-endian length and
    its bytes, exactly prod(shape) elements and nothing after them; the result is an
    object array of `bytes`. Raises OIPError naming `name` on any mismatch.
    """
    dt = datatype(datatype_name, name)
    dims = check_shape(shape, name, dt)
    view = _byte_view(buf)
    if dt is BYTES:
        return _bytes_from_raw(view, dims, name)
    count = math.prod(dims)
    expected = count * dt.itemsize
    if view.nbytes != expected:
        raise OIPError.tensor(name, f"has {view.nbytes} bytes of data, but shape "
                                    f"{list(dims)} of {dt.name} needs {expected}")
    dtype = dt.numpy_dtype()
    if count == 0:
        return np.empty(dims, dtype)
    if dt.kind == "bool":
        raw = np.frombuffer(view, dtype=np.uint8)
        if raw.max() > 1:
            raise OIPError.tensor(name, "BOOL elements must be the bytes 0 or 1")
        return raw.view(dtype).reshape(dims)
    return np.frombuffer(view, dtype=dtype).reshape(dims)


def _bytes_from_raw(view: memoryview, dims: tuple[int, ...], name: str) -> np.ndarray:
    count = math.prod(dims)
    total = view.nbytes
    if count * _LENGTH.size > total:
        raise OIPError.tensor(name, f"shape {list(dims)} declares {count} BYTES elements, "
                                    f"which need at least {count * _LENGTH.size} bytes, "
                                    f"but there are {total}")
    out = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        if offset + _LENGTH.size > total:
            raise OIPError.tensor(name, f"BYTES element {i} is truncated: its 4-byte "
                                        f"length starts at byte {offset} of {total}")
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        end = offset + length
        if end > total:
            raise OIPError.tensor(name, f"BYTES element {i} is truncated: it claims "
                                        f"{length} bytes, {total - offset} remain")
        out[i] = view[offset:end].tobytes()
        offset = end
    if offset != total:
        raise OIPError.tensor(name, f"{total - offset} bytes follow the {count} BYTES "
                                    f"elements of shape {list(dims)}")
    return out.reshape(dims)


def _element_bytes(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, (bytearray, memoryview)):
        return bytes(item)
    raise TypeError(f"a BYTES element must be str or bytes, got {type(item).__name__}")


def serialize_bytes(arr: np.ndarray) -> bytes:
    """BYTES elements (str encoded UTF-8, or bytes) in the length-prefixed wire form."""
    parts: list[bytes] = []
    for item in np.asarray(arr).ravel(order="C").tolist():
        data = _element_bytes(item)
        if len(data) > _MAX_ELEMENT:
            raise ValueError(f"a BYTES element of {len(data)} bytes exceeds 2**32 - 1")
        parts.append(_LENGTH.pack(len(data)))
        parts.append(data)
    return b"".join(parts)


def raw_from_array(arr: Any) -> tuple[str, list[int], memoryview | bytes]:
    """(datatype, shape, raw bytes) of an array, for raw contents or a binary body.

    A C-contiguous little-endian array is not copied: the bytes are a `memoryview` of
    its memory (format "B", so len() is the byte count; it keeps the array alive).
    Other layouts are made contiguous once. BYTES (object, bytes or str arrays) are
    serialised with their length prefixes into new `bytes`. Raises TypeError for
    dtypes the protocol cannot carry.
    """
    array = np.asarray(arr)
    dt = datatype_of(array.dtype)
    shape = [int(d) for d in array.shape]
    if dt is BYTES:
        return dt.name, shape, serialize_bytes(array)
    wire = dt.numpy_dtype()
    if array.dtype != wire or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array, dtype=wire)
    return dt.name, shape, memoryview(array.reshape(-1).view(np.uint8))


# --- typed InferTensorContents --------------------------------------------------------


def array_from_contents(contents: Any, datatype_name: str | Datatype, shape: Any,
                        name: str) -> np.ndarray:
    """The tensor an `InferTensorContents` message holds in its datatype's field.

    The field must hold exactly prod(shape) values and every other field none; values
    of narrow types (INT8/16, UINT8/16 travel as 32-bit) must fit the type. FP16 and
    BF16 have no typed field and are refused: they travel raw.
    """
    dt = datatype(datatype_name, name)
    dims = check_shape(shape, name, dt)
    if dt.contents_field is None:
        raise OIPError.tensor(name, f"{dt.name} has no typed contents field; send it in "
                                    "raw_input_contents")
    for other in CONTENTS_FIELDS:
        if other != dt.contents_field and len(getattr(contents, other)):
            raise OIPError.tensor(name, f"a {dt.name} tensor carries its values in "
                                        f"{dt.contents_field}, not {other}")
    values = getattr(contents, dt.contents_field)
    count = math.prod(dims)
    if len(values) != count:
        raise OIPError.tensor(name, f"{dt.contents_field} has {len(values)} values, but "
                                    f"shape {list(dims)} needs {count}")
    if dt is BYTES:
        return np.fromiter(values, dtype=object, count=count).reshape(dims)
    wide = np.fromiter(values, dtype=CONTENTS_FIELDS[dt.contents_field], count=count)
    target = dt.numpy_dtype()
    if wide.dtype.itemsize > target.itemsize and count:
        info = np.iinfo(target)
        if wide.min() < info.min or wide.max() > info.max:
            raise OIPError.tensor(name, f"{dt.contents_field} holds values outside "
                                        f"{dt.name}'s range [{info.min}, {info.max}]")
    return wide.astype(target, copy=False).reshape(dims)


def contents_from_array(arr: Any, contents: Any) -> tuple[str, list[int]]:
    """Write an array into an (empty) `InferTensorContents` message's typed field.

    Returns (datatype, shape). Raises TypeError for FP16/BF16 (raw only) and for dtypes
    the protocol cannot carry.
    """
    array = np.asarray(arr)
    dt = datatype_of(array.dtype)
    if dt.contents_field is None:
        raise TypeError(f"{dt.name} has no typed contents field; use raw contents")
    flat = array.ravel(order="C").tolist()
    if dt is BYTES:
        flat = [_element_bytes(x) for x in flat]
    getattr(contents, dt.contents_field).extend(flat)
    return dt.name, [int(d) for d in array.shape]


# --- JSON data ------------------------------------------------------------------------

_JSON_TYPES: Final[dict[Kind, tuple[type, ...]]] = {
    "bool": (bool,), "uint": (int,), "int": (int,), "float": (int, float), "bytes": (str,),
}
_JSON_WORDS: Final[dict[Kind, str]] = {
    "bool": "JSON booleans", "uint": "JSON integers", "int": "JSON integers",
    "float": "JSON numbers", "bytes": "JSON strings",
}


def _flatten(data: Any, name: str) -> tuple[list[Any], set[type]]:
    """Row-major leaves of flat or nested lists (as Triton, the nesting is not checked
    against the shape, only the count), and the set of their Python types."""
    if not isinstance(data, list):
        raise OIPError.tensor(name, f"data must be a list, got {type(data).__name__}")
    level: list[Any] = data
    for _ in range(MAX_RANK + 1):
        types = set(map(type, level))
        if list not in types:
            return level, types
        if types != {list}:
            raise OIPError.tensor(name, "data mixes lists and values at one nesting level")
        level = list(itertools.chain.from_iterable(level))
    raise OIPError.tensor(name, f"data is nested deeper than {MAX_RANK} levels")


def array_from_json(data: Any, datatype_name: str | Datatype, shape: Any,
                    name: str) -> np.ndarray:
    """The tensor a KServe v2 JSON `data` member holds (parsed JSON: lists of values).

    `data` is row-major, flat or nested; it must hold exactly prod(shape) elements of
    the datatype's JSON type: booleans for BOOL, integers in range for the integer
    types, numbers for the float types (refused where they overflow FP16/BF16/FP32),
    strings for BYTES (UTF-8 encoded into an object array of `bytes`).
    """
    dt = datatype(datatype_name, name)
    dims = check_shape(shape, name, dt)
    flat, types = _flatten(data, name)
    count = math.prod(dims)
    if len(flat) != count:
        raise OIPError.tensor(name, f"data has {len(flat)} elements, but shape "
                                    f"{list(dims)} needs {count}")
    allowed = _JSON_TYPES[dt.kind]
    # bool is an int subclass in Python, but never a number in an OIP tensor.
    if any(not issubclass(t, allowed) or (t is bool and dt.kind != "bool") for t in types):
        raise OIPError.tensor(name, f"{dt.name} data must be {_JSON_WORDS[dt.kind]}")
    if dt is BYTES:
        out = np.empty(count, dtype=object)
        out[:] = [s.encode("utf-8") for s in flat]
        return out.reshape(dims)
    target = dt.numpy_dtype()
    if dt.kind in ("int", "uint") and flat:
        info = np.iinfo(target)
        low, high = min(flat), max(flat)
        if low < info.min or high > info.max:
            raise OIPError.tensor(name, f"data holds {low if low < info.min else high}, "
                                        f"outside {dt.name}'s range [{info.min}, {info.max}]")
    if dt.kind == "float":
        try:
            source = np.array(flat, dtype=np.float64)
        except OverflowError:  # a Python int beyond any float
            raise OIPError.tensor(name, f"data holds a number outside {dt.name}'s range"
                                  ) from None
        with np.errstate(over="ignore"):
            arr = source.astype(target, copy=False)
        if count and not np.isfinite(arr).all():
            bad = ~np.isfinite(arr) & np.isfinite(source)
            if bad.any():
                value = float(source[bad][0])
                raise OIPError.tensor(name, f"data holds {value!r}, outside {dt.name}'s range")
        return arr.reshape(dims)
    return np.array(flat, dtype=target).reshape(dims)


def json_from_array(arr: Any, name: str) -> tuple[str, list[int], list[Any]]:
    """(datatype, shape, flat row-major data list) of an array, for a JSON response.

    BYTES elements become strings, so they must be valid UTF-8; floats must be finite,
    since JSON has no NaN or infinity (orjson would write `null`). Either failure raises
    OIPError naming the output: the client can ask for it with `binary_data`.
    """
    array = np.asarray(arr)
    dt = datatype_of(array.dtype)
    shape = [int(d) for d in array.shape]
    flat = array.ravel(order="C")
    if dt is BYTES:
        data: list[Any] = []
        for item in flat.tolist():
            if isinstance(item, str):
                data.append(item)
                continue
            try:
                data.append(_element_bytes(item).decode("utf-8"))
            except UnicodeDecodeError:
                raise OIPError.output(name, "BYTES elements that are not UTF-8 cannot be "
                                            "JSON; request it with binary_data") from None
        return dt.name, shape, data
    if dt.kind == "float":
        wide = flat.astype(np.float64)
        if not np.isfinite(wide).all():
            raise OIPError.output(name, "holds NaN or infinity, which JSON cannot carry; "
                                        "request it with binary_data")
        return dt.name, shape, wide.tolist()
    return dt.name, shape, flat.tolist()


# --- InferParameter maps --------------------------------------------------------------

ParamValue = bool | int | float | str


def params_from_proto(params: Mapping[str, Any]) -> dict[str, ParamValue]:
    """A `map<string, InferParameter>` as a plain dict (entries with no value set, as
    MLServer's trimmed proto produces for double/uint64 values, are left out)."""
    out: dict[str, ParamValue] = {}
    for key, param in params.items():
        which = param.WhichOneof("parameter_choice")
        if which is not None:
            out[key] = getattr(param, which)
    return out


def params_to_proto(target: Any, params: Mapping[str, ParamValue]) -> None:
    """Fill a `map<string, InferParameter>`: bool, int64 (uint64 above it), double,
    string. Raises TypeError/ValueError for other values or integers out of range."""
    for key, value in params.items():
        param = target[key]
        if isinstance(value, bool):
            param.bool_param = value
        elif isinstance(value, int):
            if _INT64[0] <= value <= _INT64[1]:
                param.int64_param = value
            elif 0 <= value <= _UINT64_MAX:
                param.uint64_param = value
            else:
                raise ValueError(f"parameter {key!r}: {value} fits neither int64 nor uint64")
        elif isinstance(value, float):
            param.double_param = value
        elif isinstance(value, str):
            param.string_param = value
        else:
            raise TypeError(f"parameter {key!r}: {type(value).__name__} is not a "
                            "bool, int, float or str")


# --- gRPC messages (duck-typed) -------------------------------------------------------


def arrays_from_infer_request(request: Any) -> dict[str, np.ndarray]:
    """The input arrays of a `ModelInferRequest`, by name in request order.

    Triton's rules: when `raw_input_contents` is used no input may set `contents`, and
    there is one raw entry per input, in order; otherwise each input's typed contents
    (an input with neither and a non-empty shape has no data). Names must be unique.
    Raw arrays are views of the message's bytes (read-only).
    """
    inputs = list(request.inputs)
    raw = request.raw_input_contents
    names = [inp.name for inp in inputs]
    _check_unique(names, "input")
    out: dict[str, np.ndarray] = {}
    if len(raw):
        for inp in inputs:
            if inp.HasField("contents"):
                raise OIPError.tensor(inp.name, "contents must not be set when the request "
                                                "uses raw_input_contents")
        if len(raw) > len(inputs):
            raise OIPError.body(f"the request has {len(raw)} raw_input_contents entries "
                                f"for {len(inputs)} inputs")
        for i, inp in enumerate(inputs):
            if i >= len(raw):
                raise OIPError.tensor(inp.name, "unable to find data for this input: "
                                                "raw_input_contents has no entry for it")
            out[inp.name] = array_from_raw(raw[i], inp.datatype, inp.shape, inp.name)
        return out
    for inp in inputs:
        if not inp.HasField("contents"):
            dims = check_shape(inp.shape, inp.name)
            if math.prod(dims):
                raise OIPError.tensor(inp.name, "unable to find data for this input: "
                                                "neither contents nor raw_input_contents")
        out[inp.name] = array_from_contents(inp.contents, inp.datatype, inp.shape, inp.name)
    return out


def fill_infer_response(response: Any, outputs: Iterable[tuple[str, Any]]) -> None:
    """Append outputs to a `ModelInferResponse` in raw form, as tritonclient expects:
    each output's name, datatype and shape in `outputs`, its bytes in the matching
    `raw_output_contents` entry (protobuf takes `bytes`: one copy per output)."""
    for name, arr in outputs:
        dt, shape, data = raw_from_array(arr)
        tensor = response.outputs.add()
        tensor.name = name
        tensor.datatype = dt
        tensor.shape.extend(shape)
        response.raw_output_contents.append(data if isinstance(data, bytes) else bytes(data))


def _check_unique(names: Sequence[str], what: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise OIPError.body(f"the request names {what} {n!r} twice")
        seen.add(n)


# --- HTTP: Triton's binary tensor extension -------------------------------------------


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """A model tensor as metadata describes it; `shape` None means any shape, -1 marks
    a variable dimension. Needed to read a raw body, which names nothing."""

    name: str
    datatype: str
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RequestInput:
    """One input of an HTTP inference request, checked but not yet decoded."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    parameters: dict[str, Any]
    #: The JSON `data` member, for an input sent as JSON.
    data: Any = None
    #: Its bytes in the body (a view, no copy), for an input with `binary_data_size`.
    raw: memoryview | None = None

    @property
    def binary(self) -> bool:
        return self.raw is not None

    def to_numpy(self) -> np.ndarray:
        """The input as an array: a view of the body for binary inputs."""
        if self.raw is not None:
            return array_from_raw(self.raw, self.datatype, self.shape, self.name)
        return array_from_json(self.data, self.datatype, self.shape, self.name)


@dataclass(frozen=True, slots=True)
class RequestedOutput:
    """One output the client listed, with its `binary_data` choice resolved."""

    name: str
    parameters: dict[str, Any]
    binary: bool


@dataclass(frozen=True, slots=True)
class HttpInferRequest:
    """A parsed HTTP inference request (JSON or binary-extension body)."""

    #: The JSON inference request as parsed (for a raw body: the equivalent header).
    header: dict[str, Any]
    inputs: tuple[RequestInput, ...]
    #: The outputs the client listed; empty means every output.
    outputs: tuple[RequestedOutput, ...]
    #: The request's `binary_data_output` (False when absent): the default for outputs.
    binary_output: bool = False

    @property
    def id(self) -> str | None:
        return self.header.get("id")

    @property
    def parameters(self) -> dict[str, Any]:
        return self.header.get("parameters") or {}

    def wants_binary(self, output: str) -> bool:
        """Whether `output` goes back as binary data: its own `binary_data` when the
        client listed it with one, else the request's `binary_data_output`."""
        for o in self.outputs:
            if o.name == output:
                return o.binary
        return self.binary_output

    def arrays(self) -> dict[str, np.ndarray]:
        """Every input decoded, by name in request order."""
        return {i.name: i.to_numpy() for i in self.inputs}


def parse_header_length(value: str | int | None, body_length: int) -> int | None:
    """The `Inference-Header-Content-Length` value, checked against the body length.

    None when the header is absent (the whole body is JSON). Refuses anything but a
    decimal integer in [0, body_length].
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("-") else text
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 19:
            raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} must be an integer, "
                                f"got {value[:40]!r}")
        length = int(text)
    elif isinstance(value, int) and not isinstance(value, bool):
        length = value
    else:
        raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} must be an integer")
    if length < 0:
        raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} {length} is negative")
    if length > body_length:
        raise OIPError.body(f"{INFERENCE_HEADER_CONTENT_LENGTH} {length} exceeds the "
                            f"body's {body_length} bytes")
    return length


def parse_http_infer_request(body: Any, header_length: str | int | None, *,
                             raw_input: TensorSpec | None = None) -> HttpInferRequest:
    """Parse an HTTP inference request body, with or without binary tensors.

    `header_length` is the `Inference-Header-Content-Length` header as received (None
    when absent: the whole body is the JSON request). With a length, the body is that
    many bytes of JSON followed by the binary inputs, concatenated in the order of the
    inputs that carry `parameters.binary_data_size`; each size must fit in what
    remains and together they must use the body exactly. A length of 0 is Triton's raw
    body: the whole body is the data of the model's only input, `raw_input` (None when
    the model has not exactly one input, which refuses the request).

    The JSON header is checked for structure (inputs with a name, known datatype,
    valid shape and either `data` or `binary_data_size`; unique names; outputs with a
    name; boolean `binary_data`/`binary_data_output`); tensors are decoded later by
    `RequestInput.to_numpy`, so a handler can look at names first.
    """
    view = _byte_view(body)
    length = parse_header_length(header_length, view.nbytes)
    if length == 0:
        if raw_input is None:
            raise OIPError.body("a raw request body (Inference-Header-Content-Length: 0) "
                                "needs a model with exactly one input")
        return _raw_request(view, raw_input)
    head = view if length is None else view[:length]
    try:
        header = orjson.loads(head)
    except orjson.JSONDecodeError as exc:
        raise OIPError.body(f"the inference request is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise OIPError.body("the inference request must be a JSON object")
    request = _check_header(header)
    offset = view.nbytes if length is None else length
    inputs: list[RequestInput] = []
    for inp in request.inputs:
        if not inp.binary:
            inputs.append(inp)
            continue
        if length is None:
            raise OIPError.tensor(inp.name, f"binary_data_size needs the "
                                            f"{INFERENCE_HEADER_CONTENT_LENGTH} header")
        size = inp.parameters["binary_data_size"]
        if size > view.nbytes - offset:
            raise OIPError.tensor(inp.name, f"binary_data_size {size} runs past the end of "
                                            f"the body ({view.nbytes - offset} bytes remain)")
        inputs.append(RequestInput(inp.name, inp.datatype, inp.shape, inp.parameters,
                                   raw=view[offset:offset + size]))
        offset += size
    if offset != view.nbytes:
        raise OIPError.body(f"{view.nbytes - offset} bytes follow the JSON header and "
                            "the binary inputs it declares")
    return HttpInferRequest(header, tuple(inputs), request.outputs, request.binary_output)


def _params(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    params = obj.get("parameters")
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise OIPError.body(f"{where}: parameters must be a JSON object")
    return params


def _flag(params: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = params.get(key)
    if value is not None and not isinstance(value, bool):
        raise OIPError.body(f"{where}: parameter {key} must be a boolean")
    return value


def _check_header(header: dict[str, Any]) -> HttpInferRequest:
    """Structure checks of a JSON inference request; binary inputs get a placeholder
    empty `raw` that the caller replaces with their slice of the body."""
    if "id" in header and not isinstance(header["id"], str):
        raise OIPError.body("the request id must be a string")
    binary_output = bool(_flag(_params(header, "the request"), "binary_data_output",
                               "the request"))
    raw_inputs = header.get("inputs")
    if not isinstance(raw_inputs, list):
        raise OIPError.body("the inference request needs an 'inputs' list")
    inputs: list[RequestInput] = []
    for i, obj in enumerate(raw_inputs):
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise OIPError.body(f"inputs[{i}] must be an object with a string name")
        name = obj["name"]
        dt = datatype(obj.get("datatype"), name)
        dims = check_shape(obj.get("shape"), name, dt)
        params = _params(obj, f"input {name!r}")
        size = params.get("binary_data_size")
        if size is None:
            if "data" not in obj:
                raise OIPError.tensor(name, "has neither data nor binary_data_size")
            inputs.append(RequestInput(name, dt.name, dims, params, data=obj["data"]))
            continue
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise OIPError.tensor(name, "binary_data_size must be a non-negative integer")
        if "data" in obj:
            raise OIPError.tensor(name, "has both data and binary_data_size")
        if dt is not BYTES and size != math.prod(dims) * dt.itemsize:
            raise OIPError.tensor(name, f"binary_data_size {size} does not match shape "
                                        f"{list(dims)} of {dt.name} "
                                        f"({math.prod(dims) * dt.itemsize} bytes)")
        inputs.append(RequestInput(name, dt.name, dims, params, raw=memoryview(b"")))
    _check_unique([i.name for i in inputs], "input")
    raw_outputs = header.get("outputs", [])
    if not isinstance(raw_outputs, list):
        raise OIPError.body("'outputs' must be a list")
    outputs: list[RequestedOutput] = []
    for i, obj in enumerate(raw_outputs):
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise OIPError.body(f"outputs[{i}] must be an object with a string name")
        params = _params(obj, f"output {obj['name']!r}")
        binary = _flag(params, "binary_data", f"output {obj['name']!r}")
        outputs.append(RequestedOutput(obj["name"], params,
                                       binary_output if binary is None else binary))
    _check_unique([o.name for o in outputs], "output")
    return HttpInferRequest(header, tuple(inputs), tuple(outputs), binary_output)


def _raw_request(view: memoryview, spec: TensorSpec) -> HttpInferRequest:
    """Triton's raw body: all of it is the one input; at most one variable dimension
    (a leading -1 beside another counts as batch size 1), BYTES as one element of
    shape [1] (the body is the element's bytes, no length prefix); every output binary.
    """
    dt = datatype(spec.datatype, spec.name)
    declared = list(spec.shape) if spec.shape is not None else [-1]
    if any(isinstance(d, bool) or not isinstance(d, int) or d < -1 for d in declared):
        raise ValueError(f"model input {spec.name!r} has an invalid shape {declared}")
    if dt is BYTES:
        if not declared or any(d not in (1, -1) for d in declared):
            raise OIPError.tensor(spec.name, f"a raw body fills a BYTES input only when "
                                             f"its shape is [1], not {declared}")
        if view.nbytes > _MAX_ELEMENT:
            raise OIPError.tensor(spec.name, "a BYTES element cannot exceed 2**32 - 1 bytes")
        shape = tuple(1 for _ in declared)
        data = memoryview(_LENGTH.pack(view.nbytes) + view.tobytes())
    else:
        if declared.count(-1) > 1 and declared[0] == -1:
            declared[0] = 1  # a batch of one, as Triton treats a raw request
        if declared.count(-1) > 1:
            raise OIPError.tensor(spec.name, f"a raw body cannot fill shape {declared}: "
                                             "more than one variable dimension")
        fixed = math.prod(d for d in declared if d != -1) * dt.itemsize
        if -1 in declared:
            if fixed == 0 or view.nbytes % fixed:
                raise OIPError.tensor(spec.name, f"{view.nbytes} bytes are not a whole "
                                                 f"number of {dt.name} elements of shape "
                                                 f"{declared}")
            declared[declared.index(-1)] = view.nbytes // fixed
        elif view.nbytes != fixed:
            raise OIPError.tensor(spec.name, f"has {view.nbytes} bytes of data, but shape "
                                             f"{declared} of {dt.name} needs {fixed}")
        shape = check_shape(declared, spec.name, dt)
        data = view
    params = {"binary_data_size": data.nbytes}
    header = {"inputs": [{"name": spec.name, "datatype": dt.name, "shape": list(shape),
                          "parameters": params}],
              "parameters": {"binary_data_output": True}}
    inp = RequestInput(spec.name, dt.name, shape, params, raw=data)
    return HttpInferRequest(header, (inp,), (), binary_output=True)


@dataclass(frozen=True, slots=True)
class ResponseOutput:
    """One output to send: its array, whether as binary data, and extra parameters."""

    name: str
    array: Any
    binary: bool = True
    parameters: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class HttpInferResponse:
    """An HTTP inference response body, ready to write chunk by chunk."""

    #: The JSON header first, then each binary output's bytes in output order.
    chunks: list[bytes | memoryview] = field(default_factory=list)
    #: The `Inference-Header-Content-Length` value; None when no output is binary,
    #: the body is then plain JSON and the header must not be sent.
    header_length: int | None = None

    @property
    def content_length(self) -> int:
        return sum(memoryview(c).nbytes for c in self.chunks)

    @property
    def content_type(self) -> str:
        """What to send as Content-Type (tritonclient does not read it)."""
        return "application/json" if self.header_length is None else \
            "application/octet-stream"

    def body(self) -> bytes:
        """The chunks joined (one copy): for callers that cannot write chunks."""
        return b"".join(self.chunks)


def build_http_infer_response(outputs: Iterable[ResponseOutput], *, model_name: str,
                              model_version: str | None = None, id: str | None = None,
                              parameters: Mapping[str, Any] | None = None,
                              ) -> HttpInferResponse:
    """The body of an inference response: a JSON header whose binary outputs carry
    `parameters.binary_data_size`, followed by their bytes (views of the arrays where
    contiguous). JSON outputs carry flat row-major `data` (see `json_from_array`)."""
    head: dict[str, Any] = {"model_name": model_name}
    if model_version:
        head["model_version"] = model_version
    if id:
        head["id"] = id
    if parameters:
        head["parameters"] = dict(parameters)
    tensors: list[dict[str, Any]] = []
    chunks: list[bytes | memoryview] = [b""]
    for out in outputs:
        params = dict(out.parameters or {})
        if out.binary:
            dt, shape, data = raw_from_array(out.array)
            params["binary_data_size"] = memoryview(data).nbytes
            tensor: dict[str, Any] = {"name": out.name, "datatype": dt, "shape": shape}
            chunks.append(data)
        else:
            dt, shape, values = json_from_array(out.array, out.name)
            tensor = {"name": out.name, "datatype": dt, "shape": shape, "data": values}
        if params:
            tensor["parameters"] = params
        tensors.append(tensor)
    head["outputs"] = tensors
    chunks[0] = orjson.dumps(head)
    binary = len(chunks) > 1
    return HttpInferResponse(chunks, len(chunks[0]) if binary else None)


__all__ = [
    "BINARY_EXTENSION", "BYTES", "CONTENTS_FIELDS", "DATATYPES",
    "INFERENCE_HEADER_CONTENT_LENGTH", "MAX_RANK", "Datatype", "HttpInferRequest",
    "HttpInferResponse", "OIPError", "RequestInput", "RequestedOutput", "ResponseOutput",
    "TensorSpec", "array_from_contents", "array_from_json", "array_from_raw",
    "arrays_from_infer_request", "build_http_infer_response", "check_shape",
    "contents_from_array", "datatype", "datatype_of", "fill_infer_response",
    "json_from_array", "params_from_proto", "params_to_proto", "parse_header_length",
    "parse_http_infer_request", "raw_from_array", "serialize_bytes",
]
