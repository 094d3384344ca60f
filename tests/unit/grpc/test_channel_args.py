"""gRPC connection limits, age and keepalive as grpc core server options (0 leaves grpc's
own limits)."""

from __future__ import annotations

import pytest

from tensorwire.grpc.channel_args import (
    MIN_CLIENT_PING_INTERVAL,
    connection_options,
    limit_options,
)
from tensorwire.ops.sources import ConfigError, load_settings
from tensorwire.settings import Settings


def test_defaults_bound_every_connection_hazard():
    assert dict(limit_options(Settings())) == {
        "grpc.server_handshake_timeout_ms": 10_000,
        "grpc.max_allowed_incoming_connections": 1000,
        "grpc.max_connection_idle_ms": 300_000,
        "grpc.max_concurrent_streams": 100,
        # streams answered but not yet released by Python must not count against the cap
        "grpc.http.overload_protection": 0,
    }


def test_zero_leaves_grpc_defaults():
    off = Settings(header_timeout=0, max_connections=0, grpc_max_connection_idle=0,
                   grpc_max_concurrent_streams=0)
    assert limit_options(off) == []
    assert dict(limit_options(Settings(header_timeout=0.0001)))[
        "grpc.server_handshake_timeout_ms"] == 1


def test_defaults_age_connections_and_ping_idle_ones():
    s = Settings()
    # a safe non-zero age, and a grace that outlasts any unary call's time limit
    assert s.grpc_max_connection_age > 0
    assert s.grpc_max_connection_age_grace >= s.request_timeout
    opts = dict(connection_options(s))
    assert opts["grpc.max_connection_age_ms"] == round(s.grpc_max_connection_age * 1000)
    assert opts["grpc.max_connection_age_grace_ms"] == round(
        s.grpc_max_connection_age_grace * 1000)
    assert opts["grpc.keepalive_time_ms"] == round(s.grpc_keepalive_time * 1000)
    # grpc 1.85 watches an unanswered ping with ping_timeout, not keepalive_timeout alone
    assert opts["grpc.keepalive_timeout_ms"] == opts["grpc.http2.ping_timeout_ms"] == round(
        s.grpc_keepalive_timeout * 1000)
    assert opts["grpc.keepalive_permit_without_calls"] == 1
    assert opts["grpc.http2.max_pings_without_data"] == 0
    assert opts["grpc.http2.min_ping_interval_without_data_ms"] == round(
        MIN_CLIENT_PING_INTERVAL * 1000)


def test_age_zero_keeps_connections_and_short_keepalive_lowers_the_ping_floor():
    s = Settings(grpc_max_connection_age=0, grpc_keepalive_time=2.5)
    opts = dict(connection_options(s))
    assert "grpc.max_connection_age_ms" not in opts
    assert "grpc.max_connection_age_grace_ms" not in opts
    assert opts["grpc.http2.min_ping_interval_without_data_ms"] == 2500


def test_without_permit_clients_get_grpcs_default_ping_policy():
    opts = dict(connection_options(Settings(grpc_keepalive_permit_without_calls=False)))
    assert opts["grpc.keepalive_permit_without_calls"] == 0
    assert "grpc.http2.min_ping_interval_without_data_ms" not in opts


def test_huge_values_fit_grpcs_int_arguments():
    opts = dict(connection_options(Settings(grpc_max_connection_age=1e9,
                                            grpc_max_connection_age_grace=1e9)))
    assert opts["grpc.max_connection_age_ms"] == 2**31 - 1


def test_settings_from_every_source():
    s = load_settings({"grpc_keepalive_time": 30.0},
                      env={"TENSORWIRE_GRPC_MAX_CONNECTION_AGE": "45",
                           "TENSORWIRE_GRPC_KEEPALIVE_PERMIT_WITHOUT_CALLS": "false"})
    assert (s.grpc_max_connection_age, s.grpc_keepalive_time,
            s.grpc_keepalive_permit_without_calls) == (45.0, 30.0, False)


@pytest.mark.parametrize(("env", "needle"), [
    ({"TENSORWIRE_GRPC_MAX_CONNECTION_AGE": "-1"}, "grpc_max_connection_age must not"),
    ({"TENSORWIRE_GRPC_KEEPALIVE_TIME": "0"}, "grpc_keepalive_time must be positive"),
    ({"TENSORWIRE_GRPC_KEEPALIVE_TIMEOUT": "0"}, "grpc_keepalive_timeout must be positive"),
    # a call that began just before its connection aged would be cut by the grace
    ({"TENSORWIRE_GRPC_MAX_CONNECTION_AGE_GRACE": "10",
      "TENSORWIRE_REQUEST_TIMEOUT": "60"}, "at least request_timeout"),
])
def test_unsafe_values_stop_start_up(env, needle):
    with pytest.raises(ConfigError, match=needle):
        load_settings(env=env)


def test_a_short_grace_is_fine_without_age_or_time_limit():
    load_settings(env={"TENSORWIRE_GRPC_MAX_CONNECTION_AGE_GRACE": "1",
                       "TENSORWIRE_GRPC_MAX_CONNECTION_AGE": "0"})
    load_settings(env={"TENSORWIRE_GRPC_MAX_CONNECTION_AGE_GRACE": "1",
                       "TENSORWIRE_REQUEST_TIMEOUT": "0"})
