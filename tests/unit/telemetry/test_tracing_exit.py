"""Tracing at exit: the queued spans get a bounded time to reach the collector."""

from __future__ import annotations

import threading
import time

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tensorwire.telemetry.tracing import _shut_down


class Exporter(SpanExporter):
    """Exports at once, or (stuck) waits like OTLP retrying an absent collector."""

    def __init__(self, stuck: bool) -> None:
        self.stuck = stuck
        self.stopped = threading.Event()
        self.exported: list[str] = []

    def export(self, spans):
        if self.stuck:
            self.stopped.wait(60)
            return SpanExportResult.FAILURE
        self.exported.extend(s.name for s in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        self.stopped.set()


def provider_with(exporter: Exporter) -> TracerProvider:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    provider.get_tracer("test").start_span("queued").end()
    return provider


def test_a_reachable_collector_gets_every_queued_span():
    exporter = Exporter(stuck=False)
    assert _shut_down(provider_with(exporter), [exporter], timeout=30) is True
    assert exporter.exported == ["queued"]


def test_an_absent_collector_is_given_up_after_the_timeout(caplog):
    exporter = Exporter(stuck=True)
    provider = provider_with(exporter)
    start = time.monotonic()
    assert _shut_down(provider, [exporter], timeout=0.2) is False
    # the SDK alone waits for the stuck export (here 60 s; OTLP's retries: about 7 s)
    assert time.monotonic() - start < 30
    assert exporter.stopped.is_set()  # its retries were ended, not left running
    assert "spans not exported within 0.2 s of shutdown" in caplog.text
