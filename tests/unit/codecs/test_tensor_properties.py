"""Property: any dtype x shape x values round-trips bit-exactly through every wire form.

Floats are drawn as raw bit patterns, so NaNs with payloads, signed zeros, infinities
and subnormals all occur. protobuf and .npy keep every bit. JSON keeps every bit of every
non-NaN element; a NaN comes back as a NaN (JSON has no way to write its sign or payload).
"""

from __future__ import annotations

import typing as t

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pydantic import TypeAdapter

from tensorwire import v1
from tensorwire.codecs import REPLY, codec_for
from tensorwire.codecs.frameworks import TENSORFLOW, TORCH, Framework
from tensorwire.validators import DType, Shape
from tensorwire.wire import dtypes, npy

_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}


def _special_bits(unit: int) -> list[int]:
    """IEEE bit patterns worth always trying for a float of `unit` bytes.

    For 2 bytes these serve float16 and bfloat16 alike: whatever their exponent widths,
    all-ones-high patterns are NaNs/infinities in one of them and large numbers in the other.
    """
    width = 8 * unit
    sign = 1 << (width - 1)
    out = [0, sign, 1, sign | 1, (sign - 1), sign - 1 >> 1, 2**width - 1]
    for exp_bits in {2: (5, 8), 4: (8,), 8: (11,)}[unit]:
        inf = ((1 << exp_bits) - 1) << (width - 1 - exp_bits)
        quiet = 1 << (width - 2 - exp_bits)
        out += [inf, inf | sign, inf | 1, inf | sign | 3, inf | quiet, inf | quiet | sign,
                inf | quiet | 0x5]
    return sorted(set(out))


@st.composite
def tensors(draw: st.DrawFn, specs: t.Sequence[dtypes.DTypeSpec] = dtypes.TABLE
            ) -> tuple[dtypes.DTypeSpec, np.ndarray]:
    spec = draw(st.sampled_from(list(specs)))
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    if spec.is_string:
        # NumPy's fixed-width strings drop trailing NULs, so NUL is not drawn.
        text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6)
        array = draw(hnp.arrays(np.dtype("<U6"), shape, elements=text))
    elif spec.kind in ("float", "complex"):
        unit = spec.itemsize if spec.kind == "float" else spec.itemsize // 2
        bits = st.one_of(st.sampled_from(_special_bits(unit)), st.integers(0, 2**(8 * unit) - 1))
        raw = draw(hnp.arrays(np.dtype(_BITS[unit]), (*shape, 1 if spec.kind == "float" else 2),
                              elements=bits))
        float_type = spec.numpy() if spec.kind == "float" else np.dtype(f"<f{unit}")
        array = np.ascontiguousarray(raw).view(float_type)
        if spec.kind == "complex":
            array = array.view(spec.numpy())
        array = array.reshape(shape)
    else:
        array = draw(hnp.arrays(spec.numpy(), shape))
    return spec, array


def same_bits(got: np.ndarray, want: np.ndarray, *, nan_as_nan: bool = False) -> None:
    assert got.shape == want.shape
    if want.dtype.kind == "U":
        assert got.dtype.kind == "U" and got.tolist() == want.tolist()
        return
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    g, w = _components(got), _components(want)
    if nan_as_nan and dtypes.from_numpy(want.dtype).kind in ("float", "complex"):
        with np.errstate(invalid="ignore"):  # signalling NaNs
            nan = np.isnan(w.astype(np.float64))
            assert (np.isnan(g.astype(np.float64)) == nan).all()
        g, w = g[~nan], w[~nan]
    assert g.tobytes() == w.tobytes()


def _components(array: np.ndarray) -> np.ndarray:
    """Flat elements; a complex number as its two floats (each NaN-tested on its own)."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.view(flat.real.dtype) if flat.dtype.kind == "c" else flat


def base_type(fw: Framework | None) -> t.Any:
    if fw is None:
        return np.ndarray
    if fw is TORCH:
        import torch

        return torch.Tensor
    import tensorflow as tf

    return tf.Tensor


def through_every_wire(spec: dtypes.DTypeSpec, array: np.ndarray,
                       fw: Framework | None = None) -> None:
    codec = codec_for(t.Annotated[base_type(fw), DType(spec.name), Shape(array.shape)])
    ta = TypeAdapter(codec.annotation)
    value = fw.from_numpy(array) if fw else array
    back = fw.to_numpy if fw else np.asarray

    msg = v1.Tensor()
    codec.proto.fill(value, msg)
    received = v1.Tensor.FromString(msg.SerializeToString())
    same_bits(back(ta.validate_python(codec.proto.from_proto(received, REPLY))), array)

    body = codec.http.encode(value, "application/x-npy")
    assert body.media_type == npy.NPY
    same_bits(back(ta.validate_python(npy.read(body.content))), array)

    text = codec.http.encode(value, "application/json").content
    same_bits(back(ta.validate_json(text)), array, nan_as_nan=True)


PROPS = settings(max_examples=200, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(tensors())
def test_numpy_round_trips_bit_exactly(case: tuple[dtypes.DTypeSpec, np.ndarray]) -> None:
    through_every_wire(*case)


@PROPS
@given(tensors())
def test_npy_files_interoperate_with_numpy(case: tuple[dtypes.DTypeSpec, np.ndarray]) -> None:
    import io

    spec, array = case
    loaded = np.load(io.BytesIO(npy.write(array)), allow_pickle=False)
    same_bits(loaded, array)
    buf = io.BytesIO()
    np.save(buf, array)
    # NumPy itself saves bfloat16 as an anonymous V2: the declaration disambiguates.
    same_bits(npy.read(buf.getvalue(), spec), array)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors([d for d in dtypes.TABLE if d.torch is not None]))
def test_torch_round_trips_bit_exactly(case: tuple[dtypes.DTypeSpec, np.ndarray]) -> None:
    pytest.importorskip("torch")
    through_every_wire(*case, fw=TORCH)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors())
def test_tensorflow_round_trips_bit_exactly(case: tuple[dtypes.DTypeSpec, np.ndarray]) -> None:
    pytest.importorskip("tensorflow")
    through_every_wire(*case, fw=TENSORFLOW)
