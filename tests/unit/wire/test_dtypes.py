"""The one dtype table agrees with types.proto, NumPy, torch and TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

from tensorwire import v1
from tensorwire.wire import dtypes


def test_table_covers_every_proto_dtype_once() -> None:
    proto = {v.name.lower(): v.number for v in v1.DType.values if v.number}
    assert {d.name: d.proto for d in dtypes.TABLE} == proto
    assert set(dtypes.by_proto()) == set(proto.values())


@pytest.mark.parametrize("spec", [d for d in dtypes.TABLE if not d.is_string],
                         ids=lambda d: d.name)
def test_numpy_dtype_is_little_endian_with_the_table_itemsize(spec: dtypes.DTypeSpec) -> None:
    dt = spec.numpy()
    assert dt.itemsize == spec.itemsize
    assert dt.byteorder in ("<", "|") or (dt.byteorder == "=" and np.little_endian)
    assert dtypes.from_numpy(dt) is spec
    assert dtypes.from_numpy(dt.newbyteorder(">")) is spec or spec.itemsize == 1 \
        or spec is dtypes.BFLOAT16


@pytest.mark.parametrize(("name", "expected"), [
    ("float32", "float32"), ("f4", "float32"), ("float", "float64"), ("double", "float64"),
    ("int", "int64"), ("?", "bool"), ("str", "string"), ("U", "string"), ("BF16", "bfloat16"),
    ("complex", "complex128"), ("uint64", "uint64"),
])
def test_resolve_accepts_numpy_names_and_aliases(name: str, expected: str) -> None:
    assert dtypes.resolve(name).name == expected


@pytest.mark.parametrize("name", ["float33", "object", "O", "datetime64", "S3", "V8", "",
                                  "float128"])
def test_resolve_refuses_what_the_wire_cannot_carry(name: str) -> None:
    with pytest.raises(ValueError, match="unknown dtype"):
        dtypes.resolve(name)


@pytest.mark.parametrize("dt", [np.dtype(object), np.dtype("S4"), np.dtype("M8[ns]"),
                                np.dtype([("a", "<f4")]), np.dtype(("<f4", (2,)))])
def test_from_numpy_refuses_object_structured_bytes_and_dates(dt: np.dtype) -> None:
    assert dtypes.from_numpy(dt) is None


def test_bfloat16_is_ml_dtypes_and_recognised_by_name() -> None:
    import ml_dtypes

    spec = dtypes.resolve("bfloat16")
    assert spec.numpy() == np.dtype(ml_dtypes.bfloat16)
    assert dtypes.from_numpy(np.dtype(ml_dtypes.bfloat16)) is spec
    assert dtypes.from_numpy(np.dtype(ml_dtypes.float8_e4m3fn)) is None


def test_torch_names_map_both_ways() -> None:
    torch = pytest.importorskip("torch")
    for spec in dtypes.TABLE:
        if spec.torch is None:
            assert spec.is_string
            with pytest.raises(TypeError):
                dtypes.torch_dtype(spec)
            continue
        tdt = dtypes.torch_dtype(spec)
        assert dtypes.from_torch(tdt) is spec
        # The itemsize agrees, so raw bytes mean the same thing to both.
        assert torch.empty((), dtype=tdt).element_size() == spec.itemsize
    assert dtypes.from_torch(torch.qint8) is None


@pytest.mark.slow
def test_tensorflow_names_map_both_ways() -> None:
    tf = pytest.importorskip("tensorflow")
    for spec in dtypes.TABLE:
        tdt = dtypes.tf_dtype(spec)
        assert dtypes.from_tf(tdt) is spec
        if not spec.is_string:
            assert tdt.size == spec.itemsize
    assert dtypes.from_tf(tf.resource) is None


def test_dtype_facts_are_memoised_within_a_bound() -> None:
    import numpy as np

    from tensorwire.wire import dtypes

    assert dtypes.numpy_facts(np.dtype("<f4")) == (dtypes.BY_NAME["float32"], "float32")
    assert dtypes.numpy_facts(np.dtype(">i8"))[0] is dtypes.BY_NAME["int64"]
    assert dtypes.numpy_facts(np.dtype("O")) == (None, "object")
    for n in range(1, 2 * dtypes._FACTS_MAX):  # a client can name endless string dtypes
        assert dtypes.numpy_facts(np.dtype(f"<U{n}"))[0] is dtypes.STRING
    assert len(dtypes._FACTS) <= dtypes._FACTS_MAX
    assert dtypes.numpy_facts(np.dtype(f"<U{10 * dtypes._FACTS_MAX}"))[1] == \
        f"<U{10 * dtypes._FACTS_MAX}"
