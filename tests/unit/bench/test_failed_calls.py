"""A benchmark target is met only when no call failed, and says how many did.

bench/real_model.py once printed "met" while 12-18 % of its gRPC calls failed: it
counted successes only. These pin the shared rule (bench/support/common.py) every script uses.
"""

from __future__ import annotations

import grpc
import pytest

from bench.support.common import (
    Failures,
    failed_calls,
    rps_and_failures,
    target_met,
    verdict,
    wrk_result,
)


def test_a_target_is_met_only_with_zero_failed_calls():
    assert target_met(True, 0)
    assert not target_met(True, 1)
    assert not target_met(False, 0)
    assert not target_met(False, 3)


def test_the_verdict_names_the_failed_calls():
    assert verdict(True, 0) == "met"
    assert verdict(False, 0) == "MISSED"
    assert verdict(False, 12) == "MISSED (12 failed calls)"
    assert verdict(False, 1) == "MISSED (1 failed call)"
    # even a result whose figure alone would pass reads as missed once a call failed
    assert verdict(True, 5) == "MISSED (5 failed calls)"
    assert verdict(False, 2, missed="**missed**") == "**missed** (2 failed calls)"


def test_rps_and_failures_are_printed_side_by_side():
    line = rps_and_failures(1234.56, 7)
    assert "rps=" in line and "1234.6" in line and "failed=7" in line
    assert line.index("rps=") < line.index("failed=")


def test_failures_are_counted_by_kind_warm_up_included():
    warm = Failures()
    warm.add("status 503", "the queue is full")
    measured = Failures()
    measured.add("status 503", "again")
    measured.exception(TimeoutError("client deadline"))
    measured.add("short stream", "3 of 64", count=2)
    report = measured.report(warm)
    assert report["errors"] == 5
    assert report["warmup_errors"] == 1
    assert report["error_kinds"] == {"status 503": 2, "exception TimeoutError": 1,
                                     "short stream": 2}
    assert report["first_error"] == "status 503: the queue is full"


def test_an_rpc_error_is_filed_under_its_status_code():
    failures = Failures()
    failures.exception(grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                                            grpc.aio.Metadata(),
                                            details="Received RST_STREAM with error code 7"))
    assert failures.kinds == {"rpc UNAVAILABLE": 1}
    assert "RST_STREAM" in (failures.first or "")


def test_failed_calls_sum_what_results_carry():
    assert failed_calls({"errors": 2}, {"errors": 0}, {"errors": 5}) == 7
    assert failed_calls({"rps": 10.0}) == 0  # results recorded before errors were kept


def test_wrk_error_answers_are_failures_not_requests_per_second():
    raw = {"requests": 1000, "duration_us": 2_000_000,
           "errors": {"connect": 0, "read": 3, "write": 0, "status": 100, "timeout": 1},
           "p50_us": 1000, "p90_us": 2000, "p99_us": 5000, "max_us": 9000,
           "client_cpu_s": 0.5}
    warm = {"errors": {"connect": 0, "read": 0, "write": 0, "status": 2, "timeout": 0}}
    result = wrk_result(raw, warm)
    assert result["requests"] == 900  # wrk counts answers of any status; 100 were errors
    assert result["rps"] == pytest.approx(450.0)
    assert result["errors"] == 106
    assert result["warmup_errors"] == 2
    assert result["error_kinds"] == {"wrk status": 102, "wrk read": 3, "wrk timeout": 1}
    assert result["p99_ms"] == pytest.approx(5.0)
