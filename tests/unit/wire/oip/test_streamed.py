"""`tensorwire.wire.oip.streamed`: an HTTP infer body read as it arrives, straight into
one buffer, against `parse_http_infer_request` of the same body whole: the same request
(names, parameters, arrays) or the same refusal, word for word; every size checked
before the buffer is allocated."""

from __future__ import annotations

import asyncio
import typing as t

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError
from tests.support.byte_source import ByteSource, Taker

from .samples import ALL, NUMERIC, RawSpec, assert_same, sample


def _binary_body(arrays: dict[str, np.ndarray], as_json: t.Collection[str] = (),
                 extra: bytes = b"", sizes: dict[str, int] | None = None,
                 outputs: list[dict[str, t.Any]] | None = None) -> tuple[bytes, int]:
    inputs, blobs = [], []
    for name, arr in arrays.items():
        dt, shape, raw = oip.raw_from_array(arr)
        entry: dict[str, t.Any] = {"name": name, "datatype": dt, "shape": shape}
        if name in as_json:
            entry["data"] = oip.json_from_array(arr, name)[2]
        else:
            raw = bytes(raw)
            entry["parameters"] = {"binary_data_size": (sizes or {}).get(name, len(raw))}
            blobs.append(raw)
        inputs.append(entry)
    head = orjson.dumps({"id": "r1", "inputs": inputs, "outputs": outputs or [],
                         "parameters": {"binary_data_output": True}})
    return head + b"".join(blobs) + extra, len(head)


def _outcome(run: t.Callable[[], oip.HttpInferRequest]) -> tuple[str, t.Any]:
    try:
        request = run()
        return "ok", (request.header, [(i.name, i.datatype, i.shape, i.binary)
                                       for i in request.inputs],
                      request.outputs, request.binary_output, request.arrays())
    except OIPError as exc:
        return "error", str(exc)


def _same(got: tuple[str, t.Any], want: tuple[str, t.Any]) -> None:
    assert got[0] == want[0], (got, want)
    if got[0] == "error":
        assert got[1] == want[1]
        return
    assert got[1][:4] == want[1][:4]
    for name, array in want[1][4].items():
        assert_same(got[1][4][name], array)


def _both(body: bytes, header_length: t.Any, raw_input: t.Any = None, chunk: int = 13
          ) -> tuple[Taker, tuple[str, t.Any]]:
    want = _outcome(lambda: oip.parse_http_infer_request(body, header_length,
                                                         raw_input=raw_input))
    taker = Taker()
    got = _outcome(lambda: asyncio.run(oip.read_http_infer_request(
        ByteSource(body, chunk), header_length, take=taker, raw_input=raw_input)))
    _same(got, want)
    return taker, got


ARRAYS = {f"in_{n.lower()}": sample(n, (2, 3), seed=i) for i, n in enumerate(ALL)}
F32 = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}


@pytest.mark.parametrize("chunk", [1, 13, 1 << 20])
@pytest.mark.parametrize("as_json", [(), ("in_int32", "in_fp64", "in_uint8")])
def test_every_datatype_reads_the_same(chunk: int, as_json: tuple[str, ...]) -> None:
    body, n = _binary_body(ARRAYS, as_json)
    taker, got = _both(body, str(n), chunk=chunk)
    assert got[0] == "ok" and taker.sizes == [len(body) - n]


@pytest.mark.parametrize(("case", "header_length"), [
    ("fits", None), ("fits", "x1"), ("fits", "-3"), ("fits", "99999"), ("fits", "10"),
    ("one_short", "n"), ("one_over", "n"), ("size_vs_shape", "n"), ("runs_past", "n"),
    ("json", "n"), ("not_an_object", "n"), ("no_inputs", "n"), ("both", "n"),
])
def test_refusals_are_the_same_and_come_before_any_allocation(case: str,
                                                              header_length: str | None
                                                              ) -> None:
    body, n = _binary_body(F32)
    if case == "one_short":
        body = body[:-1]
    elif case == "one_over":
        body += b"\0"
    elif case == "size_vs_shape":
        body, n = _binary_body(F32, sizes={"x": 44})
    elif case == "runs_past":
        body, n = _binary_body(F32, sizes={"x": 48})
        body, n = _binary_body({**F32, "y": F32["x"]}, sizes={"x": 48, "y": 48})
        body = body[:-40]
    elif case == "json":
        body, n = b'{"inputs": [' + b"\0" * 10, 12
    elif case == "not_an_object":
        body, n = b"[1, 2]", 6
    elif case == "no_inputs":
        body, n = b'{"outputs": []}', 15
    elif case == "both":
        head = (b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1],'
                b'"parameters":{"binary_data_size":4}}]}')
        body, n = head + b"\0" * 4, len(head)
    taker, got = _both(body, str(n) if header_length == "n" else header_length)
    if case != "fits" or header_length in ("x1", "-3", "99999", "10"):
        assert got[0] == "error" and taker.sizes == []


def test_a_json_body_and_a_binary_output_request_read_the_same() -> None:
    body = orjson.dumps({"inputs": [{"name": "x", "datatype": "INT32", "shape": [2],
                                     "data": [1, 2]}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]})
    taker, got = _both(body, None)
    assert got[0] == "ok" and taker.sizes == []


@pytest.mark.parametrize("datatype", NUMERIC)
@pytest.mark.parametrize("shape", [(-1,), (2, -1), (-1, -1, 3), None, (6,)])
def test_raw_bodies_read_the_same(datatype: str, shape: tuple[int, ...] | None) -> None:
    array = sample(datatype, (6,))
    raw = bytes(oip.raw_from_array(array)[2])
    taker, got = _both(raw, "0", RawSpec("x", datatype, shape))
    assert (taker.sizes == [len(raw)]) == (got[0] == "ok")


@pytest.mark.parametrize(("body", "spec"), [
    (b"\x00" * 10, RawSpec("x", "FP32", (-1,))),  # not whole elements
    (b"\x00" * 8, RawSpec("x", "FP32", (3,))),  # not the fixed size
    (b"\x00" * 8, RawSpec("x", "FP32", (2, -1, -1))),  # two free dimensions
    (b"\x00" * 8, None),  # no single input to fill
    (b"\x89PNG\x00", RawSpec("img", "BYTES", (1,))),  # one BYTES element: read whole
    (b"x", RawSpec("img", "BYTES", (2,))),
])
def test_raw_body_refusals_and_bytes_read_the_same(body: bytes, spec: t.Any) -> None:
    taker, _ = _both(body, "0", spec)
    assert taker.sizes == []


def test_a_truncated_body_is_refused_after_the_buffer_was_lent() -> None:
    body, n = _binary_body(F32)
    source = ByteSource(body, 7, stop_after=len(body) - 5)
    with pytest.raises(OIPError, match="ended 5 bytes short of its Content-Length"):
        asyncio.run(oip.read_http_infer_request(source, str(n), take=Taker()))


def test_the_arrays_are_views_of_the_one_buffer() -> None:
    body, n = _binary_body({"a": F32["x"], "b": F32["x"] * 2})
    taker = Taker()
    buffers: list[memoryview] = []

    def take(nbytes: int) -> memoryview:
        buffers.append(taker(nbytes))
        return buffers[-1]

    request = asyncio.run(oip.read_http_infer_request(ByteSource(body, 50), str(n),
                                                      take=take))
    region = np.frombuffer(buffers[0], np.uint8)
    assert all(np.shares_memory(a, region) for a in request.arrays().values())


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=120), header_length=st.one_of(
    st.none(), st.integers(-5, 200).map(str), st.text(max_size=4)))
def test_property_any_body_reads_as_it_parses(body: bytes, header_length: t.Any) -> None:
    head = (b'{"inputs":[{"name":"x","datatype":"UINT8","shape":[%d],'
            b'"parameters":{"binary_data_size":%d}}]}' % (len(body), len(body)))
    for candidate in (body, head + body):
        _both(candidate, header_length, RawSpec("x", "UINT8", (-1,)), chunk=17)
