"""Triton's statistics extension, read back from the Prometheus metrics.

Nothing is counted twice: the request metrics (`tensorwire.telemetry.metrics`) already
hold what Triton's `ModelStatistics` reports, and with several workers they are the whole
server's (the multiprocess files `/metrics` sums), so `GET /v2/models/stats` answers for
the server wherever it lands. A model is an API; its numbers are its native and v2 calls
on both protocols (they share the API's series). How each field is made:

- `success`: requests answered 2xx / OK, and their seconds from admission to the last
  byte; `fail`: every other answer (refusals included), and theirs;
- `compute_input`, `compute_infer`, `compute_output`: of the successful v2 requests
  (what Triton's tools send), the seconds spent decoding, in the method (for a
  batchable API, less its queue) and encoding and writing the answer; their count is
  those requests. The native routes are not timed so (two clock reads a request, which
  their fast path does without): they count in `success` and `fail` only;
- `queue`: a batchable API's requests' waits for their batch (a request split across
  batches counts once per part); another API has no queue of its own: its timed
  requests with no time (a `def` method's wait for a thread is inside compute_infer),
  counted all the same, since perf_analyzer finds the version that served it by the
  growth of this count;
- `execution_count` and `batch_stats`: a batchable API's successful batched calls by
  size (native requests included), each with its input (requests joined), infer (the
  method) and output (copied to the host, split) seconds; any other API runs once per
  timed request, batch size 1;
- `inference_count`: the items those calls computed; `last_inference`: when the API
  last answered, to within the half second the metrics are flushed in.

Streams are counted in `success` and `fail` only. With metrics off there is nothing to
read, and the extension answers UNIMPLEMENTED saying so.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..errors import Unimplemented
from ..telemetry import metrics
from .model import V2Model

_FAMILIES = (
    "tensorwire_requests", "tensorwire_request_duration_seconds", "tensorwire_phase_seconds",
    "tensorwire_timed_requests", "tensorwire_batch_queue_wait_seconds",
    "tensorwire_batch_seconds", "tensorwire_batch_runs",
    "tensorwire_last_request_timestamp_seconds",
)
_NS = 1e9


def metrics_off() -> Unimplemented:
    return Unimplemented("the statistics extension reads the server's metrics, and this "
                         "server runs with --no-metrics")


@dataclass
class _Totals:
    """What the metrics say of one model."""

    answered: float = 0.0
    succeeded: float = 0.0
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    timed: float = 0.0
    queued: float = 0.0
    queue_seconds: float = 0.0
    #: batch size -> {"runs": count, "input"/"infer"/"output": seconds}
    batches: dict[int, dict[str, float]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    last: float = 0.0

    def take(self, name: str, labels: dict[str, str], value: float) -> None:
        if name == "tensorwire_requests_total":
            self.answered += value
            if labels.get("status") in metrics.SUCCESS:
                self.succeeded += value
        elif name == "tensorwire_request_duration_seconds_sum":
            self.seconds += value
        elif name == "tensorwire_phase_seconds_total":
            self.phases[labels["phase"]] += value
        elif name == "tensorwire_timed_requests_total":
            self.timed += value
        elif name == "tensorwire_batch_queue_wait_seconds_count":
            self.queued += value
        elif name == "tensorwire_batch_queue_wait_seconds_sum":
            self.queue_seconds += value
        elif name == "tensorwire_batch_runs_total":
            self.batches[int(labels["size"])]["runs"] += value
        elif name == "tensorwire_batch_seconds_total":
            self.batches[int(labels["size"])][labels["phase"]] += value
        elif name == "tensorwire_last_request_timestamp_seconds":
            self.last = max(self.last, value)


def _duration(count: float, seconds: float) -> dict[str, int]:
    return {"count": int(count), "ns": max(int(seconds * _NS), 0)}


def statistics(models: list[V2Model]) -> list[dict[str, Any]]:
    """Triton's `model_stats` entries of `models`, in their order (JSON form: field names
    as in grpc_service.proto, 64-bit integers as numbers)."""
    totals = {m.name: _Totals() for m in models}
    for name, labels, value in metrics.samples(*_FAMILIES):
        found = totals.get(labels.get("api", ""))
        if found is not None:
            found.take(name, labels, value)
    return [_entry(m, totals[m.name]) for m in models]


def _entry(model: V2Model, t: _Totals) -> dict[str, Any]:
    timed = t.timed
    decode, compute, encode = (t.phases[p] for p in ("decode", "compute", "encode"))
    if model.api.batchable:
        queue = _duration(t.queued, t.queue_seconds)
        compute = max(compute - t.queue_seconds, 0.0)
        executions = sum(b["runs"] for b in t.batches.values())
        items = sum(size * b["runs"] for size, b in t.batches.items())
        batch_stats = [{"batch_size": size,
                        "compute_input": _duration(b["runs"], b["input"]),
                        "compute_infer": _duration(b["runs"], b["infer"]),
                        "compute_output": _duration(b["runs"], b["output"])}
                       for size, b in sorted(t.batches.items())]
    else:  # no queue of its own: counted (perf_analyzer finds the model's version by
        # it), with no time (a wait for one of its threads is inside compute_infer)
        queue = _duration(timed, 0.0)
        executions = items = timed
        batch_stats = [] if not timed else [{
            "batch_size": 1, "compute_input": _duration(timed, decode),
            "compute_infer": _duration(timed, compute),
            "compute_output": _duration(timed, encode)}]
    return {
        "name": model.name, "version": model.version,
        "last_inference": int(t.last * 1000), "inference_count": int(items),
        "execution_count": int(executions),
        "inference_stats": {
            "success": _duration(t.succeeded, t.phases["total"]),
            "fail": _duration(t.answered - t.succeeded, t.seconds - t.phases["total"]),
            "queue": queue,
            "compute_input": _duration(timed, decode),
            "compute_infer": _duration(timed, compute),
            "compute_output": _duration(timed, encode),
            "cache_hit": _duration(0, 0.0), "cache_miss": _duration(0, 0.0),
        },
        "batch_stats": batch_stats,
        "memory_usage": [],
        "response_stats": {},
    }
