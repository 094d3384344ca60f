"""/metrics counts exactly the requests made, by api, protocol and status."""

from __future__ import annotations

import logging

import grpc
import pytest

from tests.support.grpc_calls import GrpcCaller
from tests.support.ops_http import post, request, sample, scrape
from tests.support.ops_service import Ops
from tests.support.servers import serving

# Metrics are per process (thread servers share them): compare before and after.
NAMES = ("tensorwire_requests_total", "tensorwire_request_duration_seconds_count",
         "tensorwire_request_size_bytes_sum", "tensorwire_response_size_bytes_sum")


def snapshot(url: str) -> dict:
    samples = scrape(url)
    out = {}
    for api in ("echo", "tick"):
        for protocol in ("http", "grpc"):
            for status in ("200", "400", "OK", "INVALID_ARGUMENT"):
                # a series appears with its first request: absent before it is 0
                out[api, protocol, status] = sample(
                    samples, "tensorwire_requests_total", api=api, protocol=protocol,
                    status=status, missing=0.0)
            for name in NAMES[1:]:
                out[api, protocol, name] = sample(samples, name, api=api, protocol=protocol,
                                                  missing=0.0)
    return out


def test_metrics_count_a_known_number_of_requests(caplog):
    with serving(Ops, access_log=True) as server, caplog.at_level(
            logging.INFO, logger="tensorwire.access"):
        before = snapshot(server.http_url)
        for _ in range(5):
            assert post(server.http_url, "echo", {"text": "hello"}).status == 200
        for _ in range(2):
            assert post(server.http_url, "echo", {"txt": "typo"}).status == 400
        assert post(server.http_url, "tick", {"n": 3, "delay": 0}).status == 200
        with GrpcCaller(server.spec, server.grpc_target) as caller:
            for _ in range(4):
                assert caller.call("echo", {"text": "hello"}) == "hello"
            with pytest.raises(grpc.RpcError):
                caller.call("echo", {})
            assert list(caller.stream("tick", {"n": 3, "delay": 0})) == [0, 1, 2]
        after = snapshot(server.http_url)
        text = request(f"{server.http_url}/metrics").body.decode()
    delta = {k: after[k] - before[k] for k in after}
    assert delta["echo", "http", "200"] == 5
    assert delta["echo", "http", "400"] == 2
    assert delta["tick", "http", "200"] == 1
    assert delta["echo", "grpc", "OK"] == 4
    assert delta["echo", "grpc", "INVALID_ARGUMENT"] == 1
    assert delta["tick", "grpc", "OK"] == 1
    assert delta["echo", "http", "tensorwire_request_duration_seconds_count"] == 7
    assert delta["echo", "grpc", "tensorwire_request_duration_seconds_count"] == 5
    # 5 x '{"text": "hello"}' (17 bytes) + 2 x '{"txt": "typo"}' (15 bytes)
    assert delta["echo", "http", "tensorwire_request_size_bytes_sum"] == 5 * 17 + 2 * 15
    assert delta["echo", "http", "tensorwire_response_size_bytes_sum"] >= 5 * len("hello")
    assert delta["tick", "grpc", "tensorwire_response_size_bytes_sum"] > 0
    assert 'tensorwire_requests_in_flight{api="echo",protocol="http"} 0.0' in text
    assert "tensorwire_batch_size" in text  # the batching layer's metrics are declared
    lines = [r for r in caplog.records if r.name == "tensorwire.access"]
    assert len(lines) == 5 + 2 + 1 + 4 + 1 + 1
    assert {r.fields["status"] for r in lines} == {"200", "400", "OK", "INVALID_ARGUMENT"}
    assert all(r.fields["request_id"] for r in lines)


def test_metrics_can_be_turned_off():
    with serving(Ops, metrics=False) as server:
        assert request(f"{server.http_url}/metrics").status == 404
