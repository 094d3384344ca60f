"""Operations helpers for e2e tests: a call by API name, a Prometheus scrape and its
samples, and polling for a condition (plain requests are `http_calls`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from . import http_calls
from .http_calls import Reply, request


def post(base: str, api: str, payload: Any = None, *, headers: Mapping[str, str] | None = None,
         **kw: Any) -> Reply:
    """POST a JSON payload to the API `api` of the server at `base`."""
    return http_calls.post(f"{base}/{api}", payload if payload is not None else {},
                           headers=headers, **kw)


Samples = dict[tuple[str, frozenset], float]


def scrape(base: str, *, headers: Mapping[str, str] | None = None, **kw: Any) -> Samples:
    reply = request(f"{base}/metrics", headers=headers, **kw)
    assert reply.status == 200, reply.body
    return parse_metrics(reply.body.decode())


def parse_metrics(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(samples: Samples, name: str, *, missing: float | None = None, **labels: str
           ) -> float:
    """Sum of the samples of `name` whose labels include `labels`.

    No such series fails the test, unless the caller says what absence means
    (`missing=0.0`): a metric that was never exported is not a metric that reads 0.
    """
    want = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    if not found:
        assert missing is not None, f"no series {name}{labels} in the scrape"
        return missing
    return sum(found)


def wait_for(predicate: Callable[[], Any], timeout: float = 20, what: str = "condition"
             ) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} not met after {timeout} s")
