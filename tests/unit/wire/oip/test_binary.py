"""`tensorwire.wire.oip.binary`: whole HTTP infer bodies with Triton's binary extension,
built and read by tritonclient.

tritonclient's own code builds the requests and reads the responses wherever it can do
so without a server, so "compatible" means compatible with the reference client, not
with our reading of the spec.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorwire.wire import oip
from tensorwire.wire.oip import OIPError

from .samples import ALL, RawSpec, assert_same, sample

tritonclient_utils = pytest.importorskip("tritonclient.utils")
thttp = pytest.importorskip("tritonclient.http")

# --- HTTP: requests built by tritonclient ------------------------------------------------


def _triton_input(name: str, arr: np.ndarray, binary: bool) -> thttp.InferInput:
    dt = "BYTES" if arr.dtype == object else tritonclient_utils.np_to_triton_dtype(arr.dtype)
    inp = thttp.InferInput(name, list(arr.shape), dt)
    inp.set_data_from_numpy(arr, binary_data=binary)
    return inp


def test_parses_a_tritonclient_binary_request_with_every_datatype():
    arrays = {f"in_{n.lower()}": sample(n, (2, 3), seed=i) for i, n in enumerate(ALL)}
    # JSON and binary inputs mix: every other (non-BF16) one goes as JSON.
    as_json = {k for i, k in enumerate(arrays) if i % 2 and k != "in_bf16"}
    arrays["in_bytes"] = np.array([[b"a", b"", b"\x00\xff"], [b"q", b"rs", b"t"]], object)
    as_json.discard("in_bytes")
    inputs = [_triton_input(k, v, k not in as_json) for k, v in arrays.items()]
    outputs = [thttp.InferRequestedOutput("y", binary_data=False),
               thttp.InferRequestedOutput("z")]
    body, header_length = thttp.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id="r1", parameters={"temperature": 0.5})
    request = oip.parse_http_infer_request(body, str(header_length))
    assert request.id == "r1" and request.parameters == {"temperature": 0.5}
    assert [i.name for i in request.inputs] == list(arrays)
    assert {i.name for i in request.inputs if not i.binary} == as_json
    got = request.arrays()
    for name, want in arrays.items():
        if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
            assert got[name].dtype == want.dtype and np.array_equal(got[name], want), name
        else:
            assert_same(got[name], want)
    assert (request.wants_binary("y"), request.wants_binary("z")) == (False, True)
    assert not request.wants_binary("unlisted")


def test_binary_inputs_are_views_of_the_body():
    arr = np.arange(6, dtype=np.float32)
    body, n = thttp.InferenceServerClient.generate_request_body([_triton_input("x", arr, True)])
    body = bytearray(body)
    request = oip.parse_http_infer_request(body, n)
    x = request.inputs[0].to_numpy()
    assert np.shares_memory(x, np.frombuffer(body, np.uint8))
    assert x.tolist() == arr.tolist()


def test_no_outputs_listed_means_every_output_binary():
    body, n = thttp.InferenceServerClient.generate_request_body(
        [_triton_input("x", np.zeros(2, np.int8), True)])
    request = oip.parse_http_infer_request(body, n)
    assert request.outputs == () and request.binary_output
    assert request.wants_binary("anything")


def test_a_json_only_request_needs_no_header():
    body, n = thttp.InferenceServerClient.generate_request_body(
        [_triton_input("x", np.array([[1, 2]], np.int64), False)],
        outputs=[thttp.InferRequestedOutput("y", binary_data=False)])
    assert n is None
    request = oip.parse_http_infer_request(body, None)
    assert request.arrays()["x"].tolist() == [[1, 2]]
    assert not request.wants_binary("y")


def _body(header: dict, *blobs: bytes) -> tuple[bytes, int]:
    head = orjson.dumps(header)
    return head + b"".join(blobs), len(head)


def _fp32_input(name: str = "x", size: int = 8, shape: tuple = (2,)) -> dict:
    return {"name": name, "datatype": "FP32", "shape": list(shape),
            "parameters": {"binary_data_size": size}}


@pytest.mark.parametrize(("header_length", "match"), [
    ("-1", r"Inference-Header-Content-Length -1 is negative"),
    ("abc", r"Inference-Header-Content-Length must be an integer, got 'abc'"),
    ("--5", r"must be an integer"),
    ("1" * 30, r"must be an integer"),
    ("100000", r"Inference-Header-Content-Length 100000 exceeds the body's \d+ bytes"),
])
def test_header_length_is_checked_against_the_body(header_length, match):
    body, _ = _body({"inputs": [_fp32_input()]}, b"\x00" * 8)
    with pytest.raises(OIPError, match=match):
        oip.parse_http_infer_request(body, header_length)


def test_binary_sizes_are_checked_against_the_body():
    body, n = _body({"inputs": [_fp32_input("a"), _fp32_input("b")]}, b"\x00" * 12)
    with pytest.raises(OIPError, match=r"input 'b': binary_data_size 8 runs past the end of "
                                       r"the body \(4 bytes remain\)"):
        oip.parse_http_infer_request(body, n)
    body, n = _body({"inputs": [_fp32_input("a")]}, b"\x00" * 9)
    with pytest.raises(OIPError, match=r"1 bytes follow the JSON header and the binary inputs"):
        oip.parse_http_infer_request(body, n)
    body, n = _body({"inputs": [_fp32_input("a", size=12)]}, b"\x00" * 12)
    with pytest.raises(OIPError, match=r"input 'a': binary_data_size 12 does not match shape "
                                       r"\[2\] of FP32 \(8 bytes\)"):
        oip.parse_http_infer_request(body, n)
    body, _ = _body({"inputs": [_fp32_input("a")]}, b"\x00" * 8)
    with pytest.raises(OIPError, match=r"input 'a': binary_data_size needs the "
                                       r"Inference-Header-Content-Length header"):
        oip.parse_http_infer_request(body[:-8], None)


@pytest.mark.parametrize(("header", "match"), [
    ([1], r"the inference request must be a JSON object"),
    ({}, r"needs an 'inputs' list"),
    ({"inputs": [{"datatype": "FP32"}]}, r"inputs\[0\] must be an object with a string name"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]},
     r"input 'x': has neither data nor binary_data_size"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1],
                  "parameters": {"binary_data_size": 4}}]},
     r"input 'x': has both data and binary_data_size"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                  "parameters": {"binary_data_size": -4}}]},
     r"binary_data_size must be a non-negative integer"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                  "parameters": {"binary_data_size": True}}]},
     r"binary_data_size must be a non-negative integer"),
    ({"inputs": [{"name": "x", "datatype": "HALF", "shape": [1], "data": [1]}]},
     r"input 'x': unknown datatype 'HALF'"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-2], "data": [1]}]},
     r"input 'x': shape \[-2\] has a negative dimension"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "data": [1]}]},
     r"input 'x': shape must be a list of integers, got None"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}] * 2},
     r"the request names input 'x' twice"),
    ({"inputs": [], "outputs": [{"name": "y"}, {"name": "y"}]},
     r"the request names output 'y' twice"),
    ({"inputs": [], "outputs": [{"name": "y", "parameters": {"binary_data": "yes"}}]},
     r"output 'y': parameter binary_data must be a boolean"),
    ({"inputs": [], "parameters": {"binary_data_output": 1}},
     r"parameter binary_data_output must be a boolean"),
    ({"inputs": [], "parameters": []}, r"parameters must be a JSON object"),
    ({"inputs": [], "id": 5}, r"the request id must be a string"),
])
def test_json_header_structure_is_checked(header, match):
    body = orjson.dumps(header)
    for length in (None, len(body)):
        with pytest.raises(OIPError, match=match):
            oip.parse_http_infer_request(body, length)


def test_invalid_json_is_refused():
    with pytest.raises(OIPError, match=r"the inference request is not valid JSON"):
        oip.parse_http_infer_request(b'{"inputs": [', None)
    body, n = _body({"inputs": [_fp32_input()]}, b"\x00" * 8)
    with pytest.raises(OIPError, match=r"not valid JSON"):
        oip.parse_http_infer_request(body, n - 1)  # the header length cuts the JSON


def test_decoding_a_parsed_input_checks_its_data():
    body = orjson.dumps({"inputs": [{"name": "x", "datatype": "INT8", "shape": [2],
                                     "data": [1, 999]}]})
    request = oip.parse_http_infer_request(body, None)
    with pytest.raises(OIPError, match=r"input 'x': data holds 999"):
        request.arrays()


# --- HTTP: Triton's raw body (header length 0) --------------------------------------------


def test_raw_body_fills_the_one_input():
    data = np.arange(8, dtype=np.float32)
    spec = RawSpec("x", "FP32", (-1, 4))
    request = oip.parse_http_infer_request(data.tobytes(), "0", raw_input=spec)
    assert request.binary_output and request.wants_binary("y")
    assert request.inputs[0].shape == (2, 4)
    assert request.arrays()["x"].tolist() == data.reshape(2, 4).tolist()
    assert request.header["inputs"][0]["parameters"] == {"binary_data_size": 32}
    # A leading -1 beside another variable dim is a batch of one.
    request = oip.parse_http_infer_request(data.tobytes(), 0,
                                           raw_input=RawSpec("x", "FP32", (-1, -1, 2)))
    assert request.inputs[0].shape == (1, 4, 2)
    # No declared shape: one dimension.
    request = oip.parse_http_infer_request(data.tobytes(), 0,
                                           raw_input=RawSpec("x", "FP32"))
    assert request.inputs[0].shape == (8,)


def test_raw_body_of_a_bytes_input_is_one_element():
    request = oip.parse_http_infer_request(b"\x89PNG\x00", 0,
                                           raw_input=RawSpec("img", "BYTES", (-1,)))
    assert request.arrays()["img"].tolist() == [b"\x89PNG\x00"]
    with pytest.raises(OIPError, match=r"input 'img': a raw body fills a BYTES input only when "
                                       r"its shape is \[1\]"):
        oip.parse_http_infer_request(b"x", 0, raw_input=RawSpec("img", "BYTES", (2,)))


def test_raw_body_refusals():
    with pytest.raises(OIPError, match=r"needs a model with exactly one input"):
        oip.parse_http_infer_request(b"\x00" * 4, 0)
    with pytest.raises(OIPError, match=r"input 'x': 10 bytes are not a whole number of FP32 "
                                       r"elements of shape \[-1, 2\]"):
        oip.parse_http_infer_request(b"\x00" * 10, 0, raw_input=RawSpec("x", "FP32",
                                                                               (-1, 2)))
    with pytest.raises(OIPError, match=r"more than one variable dimension"):
        oip.parse_http_infer_request(b"\x00" * 8, 0, raw_input=RawSpec("x", "FP32",
                                                                              (2, -1, -1)))
    with pytest.raises(OIPError, match=r"input 'x': has 8 bytes of data, but shape \[3\]"):
        oip.parse_http_infer_request(b"\x00" * 8, 0, raw_input=RawSpec("x", "FP32",
                                                                              (3,)))


# --- HTTP: responses read by tritonclient --------------------------------------------------


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_reads_our_response_for_every_datatype(binary: bool):
    arrays = {f"out_{n.lower()}": sample(n, (3, 2), seed=i) for i, n in enumerate(ALL)}
    if not binary:
        arrays["out_bytes"] = np.array([[b"a", b""], [b"bc", b"d"], [b"e", b"f"]], object)
    outputs = [oip.ResponseOutput(k, v, binary=binary) for k, v in arrays.items()]
    response = oip.build_http_infer_response(outputs, model_name="m", model_version="1",
                                             id="r7", parameters={"p": 1})
    assert response.content_length == len(response.body())
    if binary:
        assert response.header_length == len(response.chunks[0])
        assert response.content_type == "application/octet-stream"
    else:
        assert response.header_length is None and len(response.chunks) == 1
        assert response.content_type == "application/json"
    result = thttp.InferResult.from_response_body(response.body(),
                                                  header_length=response.header_length)
    head = result.get_response()
    assert (head["model_name"], head["model_version"], head["id"]) == ("m", "1", "r7")
    assert head["parameters"] == {"p": 1}
    for name, want in arrays.items():
        got = result.as_numpy(name)
        if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
            assert got.dtype == want.dtype and np.array_equal(got, want), name
        elif name == "out_bytes" and not binary:  # tritonclient keeps JSON strings as str
            assert got.tolist() == [[b.decode() for b in row] for row in want.tolist()]
        else:
            assert_same(got, want)


def test_binary_outputs_are_chunks_that_view_the_arrays():
    big = np.arange(1000, dtype=np.float64)
    response = oip.build_http_infer_response(
        [oip.ResponseOutput("a", big), oip.ResponseOutput("b", np.array([1, 2], np.int8),
                                                          binary=False, parameters={"k": "v"})],
        model_name="m")
    header = orjson.loads(response.chunks[0])
    assert header["outputs"][0]["parameters"] == {"binary_data_size": 8000}
    assert header["outputs"][1] == {"name": "b", "datatype": "INT8", "shape": [2],
                                    "data": [1, 2], "parameters": {"k": "v"}}
    assert len(response.chunks) == 2
    assert np.shares_memory(np.frombuffer(response.chunks[1], np.uint8), big)


def test_empty_binary_outputs_still_make_a_binary_body():
    response = oip.build_http_infer_response([oip.ResponseOutput("e", np.empty(0, np.int32))],
                                             model_name="m")
    assert response.header_length == len(response.chunks[0])
    result = thttp.InferResult.from_response_body(response.body(),
                                                  header_length=response.header_length)
    assert result.as_numpy("e").shape == (0,)



@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200), header_length=st.one_of(
    st.none(), st.integers(-5, 250), st.text(max_size=5)))
def test_property_any_body_parses_or_raises_oip_error(body, header_length):
    head = b'{"inputs":[{"name":"x","datatype":"BYTES","shape":[2],' \
           b'"parameters":{"binary_data_size":%d}}]}' % len(body)
    for candidate in (body, head + body):
        try:
            request = oip.parse_http_infer_request(candidate, header_length)
            request.arrays()
        except OIPError:
            pass
