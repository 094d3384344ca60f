"""OpenTelemetry tracing: the caller's trace continues on the server, one server span per
request with decode / batch queue / model / encode children, on both protocols."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import tensorwire
from tensorwire.client import tracecontext as tc
from tests.support.servers import ROOT, free_ports, serving, spawn_cli, url_of

EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
TRACER = PROVIDER.get_tracer("tests")


@tensorwire.service
class Traced:
    @tensorwire.api
    def echo(self, text: str) -> str:
        with TRACER.start_as_current_span("user work"):  # the method's own span
            return text

    @tensorwire.api
    async def fail(self, text: str) -> str:
        raise RuntimeError("model exploded")

    @tensorwire.api(batchable=True, max_batch_size=16, max_latency_ms=1000)
    def double(self, xs: list[float]) -> list[float]:
        time.sleep(0.2)  # long enough for the other requests to queue behind the first
        return [2 * x for x in xs]


@pytest.fixture(scope="module")
def server():
    with serving(Traced, tracing=True, tracer_provider=PROVIDER, access_log=True) as s:
        yield s


@pytest.fixture(autouse=True)
def _fresh_spans():
    EXPORTER.clear()
    yield


def spans_of(trace_id: int, *, wait_for: str) -> list[ReadableSpan]:
    """The finished spans of one trace, once the server span (named `wait_for`) ended."""
    deadline = time.monotonic() + 10
    while True:
        spans = [s for s in EXPORTER.get_finished_spans() if s.context.trace_id == trace_id]
        if any(s.name == wait_for for s in spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.02)


def one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def server_span_name(protocol: str, api: str) -> str:
    if protocol == "http":
        return f"POST /{api}"
    svc = tensorwire.get_service_spec(Traced).grpc_service_name
    return f"{svc}/{api.capitalize()}"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_callers_trace_continues_with_a_span_per_phase(server, protocol):
    with tensorwire.SyncClient(url_of(server, protocol)) as client, \
            TRACER.start_as_current_span("caller") as caller:
        assert client.echo(text="hi") == "hi"
    name = server_span_name(protocol, "echo")
    spans = spans_of(caller.get_span_context().trace_id, wait_for=name)
    root = one(spans, name)
    assert root.kind is SpanKind.SERVER
    assert root.parent.span_id == caller.get_span_context().span_id  # W3C traceparent
    for phase in ("decode", "model", "encode"):
        assert one(spans, phase).parent.span_id == root.context.span_id, phase
    decode, model, encode = (one(spans, n) for n in ("decode", "model", "encode"))
    assert decode.end_time <= model.start_time <= model.end_time <= encode.start_time
    assert root.start_time <= decode.start_time and encode.end_time <= root.end_time
    # the method's own span (in the thread pool) nests under the model call
    assert one(spans, "user work").parent.span_id == model.context.span_id
    if protocol == "http":
        assert root.attributes["http.response.status_code"] == 200
        assert root.attributes["http.route"] == "/echo"
    else:
        assert root.attributes["rpc.grpc.status_code"] == 0
        assert root.attributes["rpc.method"] == "Echo"
    assert root.attributes["tensorwire.api"] == "echo"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_failing_method_marks_its_spans_as_errors(server, protocol):
    with tensorwire.SyncClient(url_of(server, protocol)) as client, \
            TRACER.start_as_current_span("caller") as caller, \
            pytest.raises(tensorwire.errors.InternalError):
        client.fail(text="x")
    name = server_span_name(protocol, "fail")
    spans = spans_of(caller.get_span_context().trace_id, wait_for=name)
    assert one(spans, name).status.status_code is StatusCode.ERROR
    model = one(spans, "model")
    assert model.status.status_code is StatusCode.ERROR
    assert model.events[0].attributes["exception.message"] == "model exploded"


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_each_request_of_a_batch_gets_its_queue_wait_and_model_call(server, protocol):
    async def calls() -> list[int]:
        async with tensorwire.AsyncClient(url_of(server, protocol)) as client:
            async def call(i: int) -> int:
                with TRACER.start_as_current_span(f"caller {i}") as caller:
                    assert await client.double(xs=[float(i)]) == [2.0 * i]
                    return caller.get_span_context().trace_id

            first = asyncio.ensure_future(call(0))
            await asyncio.sleep(0.05)  # the first runs alone; the rest queue behind it
            return [await first, *await asyncio.gather(*(call(i) for i in range(1, 4)))]

    trace_ids = asyncio.run(calls())
    assert len(set(trace_ids)) == 4  # four traces, one per caller
    name = server_span_name(protocol, "double")
    sizes = []
    for trace_id in trace_ids:
        spans = spans_of(trace_id, wait_for=name)
        root = one(spans, name)
        queue, model = one(spans, "batch queue"), one(spans, "model")
        assert queue.parent.span_id == model.parent.span_id == root.context.span_id
        assert queue.end_time == model.start_time
        assert root.start_time <= queue.start_time and model.end_time <= root.end_time
        sizes.append(model.attributes["tensorwire.batch.size"])
    assert max(sizes) >= 2, sizes  # some requests really shared a model call


def test_a_request_without_traceparent_starts_a_trace_and_logs_its_id(server, caplog):
    with caplog.at_level(logging.INFO, logger="tensorwire.access"):
        req = urllib.request.Request(server.http_url + "/echo", data=b'{"text": "x"}',
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as reply:
            assert reply.status == 200
        deadline = time.monotonic() + 10
        while not [r for r in caplog.records if r.name == "tensorwire.access"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    (record,) = [r for r in caplog.records if r.name == "tensorwire.access"]
    root = one(spans_of(int(record.fields["trace_id"], 16), wait_for="POST /echo"),
               "POST /echo")
    assert root.parent is None  # a new trace
    assert record.getMessage().endswith(f" trace={record.fields['trace_id']}")


def test_traceparent_header_is_honoured_as_sent():
    """A raw W3C header (no client of ours): its trace id and parent span are kept."""
    with serving(Traced, tracing=True, tracer_provider=PROVIDER) as srv:
        trace_id, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
        req = urllib.request.Request(
            srv.http_url + "/echo", data=b'{"text": "x"}',
            headers={"Content-Type": "application/json",
                     "traceparent": f"00-{trace_id}-{parent}-01"})
        with urllib.request.urlopen(req, timeout=10) as reply:
            assert reply.status == 200
        root = one(spans_of(int(trace_id, 16), wait_for="POST /echo"), "POST /echo")
    assert format(root.parent.span_id, "016x") == parent
    assert root.parent.is_remote


def test_tracing_off_imports_no_opentelemetry():
    code = ("import sys, asyncio\n"
            "from tensorwire.ops.serve import Server\n"
            "from tensorwire.settings import Settings\n"
            "import tensorwire, tensorwire.client\n"
            "from examples.quickstart import Quickstart\n"
            "async def main():\n"
            "    server = Server(tensorwire.get_service_spec(Quickstart),\n"
            "                    Settings(http_port=0, grpc_port=0))\n"
            "    await server.start()\n"
            "    await server.stop()\n"
            "asyncio.run(main())\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_otel_environment_variables_choose_the_exporter():
    server = spawn_cli("examples.quickstart:Quickstart", "--tracing",
                       env={"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "qs-test"},
                       drain_output=True)
    try:
        with tensorwire.SyncClient(server.http_url) as client:
            client.upper("traced")
    finally:
        server.stop()  # the SDK flushes its batch processor at exit
    output = server.output()
    assert '"name": "POST /upper"' in output, output[-3000:]
    assert '"service.name": "qs-test"' in output
    assert '"name": "decode"' in output and '"name": "encode"' in output


def test_unknown_exporter_is_a_clear_start_up_error():
    out = subprocess.run(
        [sys.executable, "-m", "tensorwire", "serve", "examples.quickstart:Quickstart",
         "--tracing", "--http-port", "0", "--grpc-port", "0"],
        env={**os.environ, "OTEL_TRACES_EXPORTER": "nosuchexporter"},
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 2
    assert "no span exporter named 'nosuchexporter'" in out.stderr


def test_the_client_carries_the_current_trace_on_both_protocols():
    """The client alone: its request carries the caller's span as W3C traceparent."""
    with TRACER.start_as_current_span("caller") as caller:
        headers: dict[str, str] = {}
        tc.inject(headers)
        metadata = tc.with_context((("authorization", "Bearer t"),))
    ctx = caller.get_span_context()
    expected = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
    assert headers == {"traceparent": expected}
    assert metadata == (("authorization", "Bearer t"), ("traceparent", expected))
    assert tc.with_context(()) == ()  # outside a span: nothing added
    assert trace.get_current_span().get_span_context().is_valid is False


def test_tracing_without_the_extra_says_which_one():
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from tensorwire.ops.cli import main\n"
            "sys.exit(main(['serve', 'examples.quickstart:Quickstart', '--tracing',\n"
            "               '--http-port', '0', '--grpc-port', '0']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 2
    assert "--tracing needs OpenTelemetry: pip install 'tensorwire[otel]'" in out.stderr


@pytest.mark.slow
def test_no_collector_does_not_hold_up_shutdown():
    """OTLP retries an absent collector for ~7 s: the exit flush gives up after 1 s."""
    closed, _ = free_ports(2)
    server = spawn_cli("examples.quickstart:Quickstart", "--tracing", drain_output=True,
                       env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{closed}"})
    with tensorwire.SyncClient(server.http_url) as client:
        client.upper("traced")
    assert server.process is not None
    start = time.monotonic()
    server.stop()
    took = time.monotonic() - start
    assert server.process.returncode == 0
    assert "spans not exported within 1 s of shutdown" in server.output()
    assert took < 5, took
