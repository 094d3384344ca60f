"""Access lines on a real server: the same fields over HTTP and gRPC, in both formats."""

from __future__ import annotations

import json
import logging
import time

import grpc
import pytest

import tensorwire
from tensorwire.telemetry import logs
from tests.support.grpc_calls import GrpcCaller
from tests.support.http_calls import post
from tests.support.ops_service import Ops
from tests.support.servers import serving


def access_records(caplog: pytest.LogCaptureFixture, count: int) -> list[logging.LogRecord]:
    deadline = time.monotonic() + 10
    while True:
        records = [r for r in caplog.records if r.name == "tensorwire.access"]
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.02)


def test_one_line_per_request_with_the_same_fields_on_both_protocols(caplog):
    with serving(Ops, access_log=True) as server, \
            caplog.at_level(logging.INFO, logger="tensorwire.access"):
        assert post(server.http_url + "/echo", {"text": "hi"},
                    headers={"X-Request-ID": "http-1"}).status == 200
        caller = GrpcCaller(tensorwire.get_service_spec(Ops), server.grpc_target)
        try:
            assert caller.call("echo", {"text": "hi"}, metadata=(("x-request-id", "grpc-1"),)
                               ) == "hi"
            with pytest.raises(grpc.RpcError):
                caller.call("concat", {"a": "x"})  # b and c missing
        finally:
            caller.close()
        http, ok, bad = access_records(caplog, 3)
    assert {k: http.fields[k] for k in ("client", "protocol", "method", "path", "api",
                                        "status", "request_id")} == {
        "client": "127.0.0.1", "protocol": "http", "method": "POST", "path": "/echo",
        "api": "echo", "status": "200", "request_id": "http-1"}
    svc = tensorwire.get_service_spec(Ops).grpc_service_name
    assert ok.fields["client"].startswith("127.0.0.1:")  # gRPC peers have a port
    assert {k: ok.fields[k] for k in ("protocol", "method", "path", "api", "status",
                                      "request_id")} == {
        "protocol": "grpc", "method": "Echo", "path": f"/{svc}/Echo", "api": "echo",
        "status": "OK", "request_id": "grpc-1"}
    assert (bad.fields["method"], bad.fields["status"]) == ("Concat", "INVALID_ARGUMENT")
    for record in (http, ok, bad):
        assert list(record.fields) == [f for f in logs.ACCESS_FIELDS if f != "trace_id"]
        assert record.fields["bytes_in"] > 0 and record.fields["duration_ms"] >= 0
    assert http.getMessage().startswith("127.0.0.1 http POST /echo 200 ")
    assert ok.getMessage().startswith(f"{ok.fields['client']} grpc Echo /{svc}/Echo OK ")
    # the JSON format carries the same fields as top-level keys
    line = json.loads(logs.JsonFormatter().format(ok))
    assert {k: line[k] for k in ok.fields} == ok.fields
    assert line["logger"] == "tensorwire.access" and line["ts"].endswith("Z")
