"""The e2e case table shape shared by the tensor, frame and TF tests."""

from __future__ import annotations

import typing as t
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from tensorwire.codecs.dataframe import DataFrameCodec
from tests.support.servers import serving
from tests.support.tensor_wire import WIRES, Outcome, Sender, as_plain


@dataclass
class Case:
    """One call, sent over each of `wires`; either `expect` or `error` is given.

    `expect(service_instance)` computes the right answer by calling the service
    directly; `error` is the location the error must point at on every wire, `msg` a
    substring of its message (a dict when the wording is wire-specific).
    """

    id: str
    service: str
    api: str
    inputs: dict[str, t.Any]
    expect: t.Callable[[t.Any], t.Any] | None = None
    error: list[t.Any] | None = None
    msg: str | dict[str, str] | None = None
    wires: tuple[str, ...] = WIRES
    #: Per-wire replacement inputs (JSON has no dtype to get wrong, for instance).
    per_wire: dict[str, dict[str, t.Any]] = field(default_factory=dict)

    def params(self) -> list[t.Any]:
        return [pytest.param(self, wire, id=f"{self.id}-{wire}") for wire in self.wires]


def sender_pool(services: dict[str, type]) -> t.Iterator[t.Callable[[str], Sender]]:
    """A module-scoped pool: each service's server starts on first use, once."""
    started: dict[str, tuple[t.Any, Sender]] = {}

    def get(name: str) -> Sender:
        if name not in started:
            ctx = serving(services[name])
            started[name] = (ctx, Sender(ctx.__enter__()))
        return started[name][1]

    try:
        yield get
    finally:
        for ctx, sender in started.values():
            sender.close()
            ctx.__exit__(None, None, None)


def run_case(case: Case, wire: str, pool: t.Callable[[str], Sender],
             services: dict[str, type]) -> Outcome:
    sender = pool(case.service)
    inputs = case.per_wire.get(wire, case.inputs)
    outcome = sender.call(wire, case.api, inputs)
    api = sender.spec.apis[case.api]
    if case.error is not None:
        assert not outcome.ok, f"expected an error, got {outcome.value!r}"
        assert outcome.status in (400, "INVALID_ARGUMENT"), outcome
        assert outcome.locs, outcome
        loc = outcome.locs[0]
        assert loc[: len(case.error)] == case.error, (loc, outcome.msgs)
        want = case.msg.get(wire) if isinstance(case.msg, dict) else case.msg
        if want is not None:
            assert any(want in m for m in outcome.msgs), (want, outcome.msgs)
        return outcome
    assert outcome.ok, (outcome.status, outcome.locs, outcome.msgs)
    assert case.expect is not None
    expected = case.expect(services[case.service]())
    got = outcome.value
    codec = api.output.codec
    if isinstance(codec, DataFrameCodec) and wire == "json":
        got = pd.DataFrame(got)
    if isinstance(expected, np.ndarray) and wire != "json":
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        if wire == "npy":
            assert outcome.media_type == "application/x-npy"
    assert as_plain(got) == as_plain(expected)
    return outcome
