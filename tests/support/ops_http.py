"""Plain HTTP calls for e2e tests (urllib: one fresh connection per call, so SO_REUSEPORT
spreads them across workers) and a Prometheus scrape parser."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


@dataclass
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(url: str, *, method: str = "GET", data: bytes | None = None,
            headers: Mapping[str, str] | None = None, context: ssl.SSLContext | None = None,
            timeout: float = 30) -> Reply:
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def post(base: str, api: str, payload: Any = None, *, headers: Mapping[str, str] | None = None,
         **kw: Any) -> Reply:
    body = json.dumps(payload if payload is not None else {}).encode()
    return request(f"{base}/{api}", method="POST", data=body,
                   headers={"Content-Type": "application/json", **(headers or {})}, **kw)


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


def sample(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when absent)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def wait_for(predicate: Callable[[], Any], timeout: float = 20, what: str = "condition"
             ) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"{what} not met after {timeout} s")
