"""Every example service through SyncClient and AsyncClient, over HTTP and gRPC.

One table of calls; each runs on the four (client, protocol) combinations and must give
the same Python result, so the two protocols and the two clients cannot drift apart.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import hashlib
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import tensorwire
from examples.constrained import TextGenerator
from examples.llm_stream import LanguageModel
from examples.models import Review, ReviewAnalyzer
from examples.quickstart import Quickstart
from tensorwire.errors import InternalError
from tests.support.client_calls import typed
from tests.support.servers import ROOT, url_of

from .services import Color, Item, Kitchen

UTC = dt.UTC
VOCAB = ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]


def words(prompt: str, n: int) -> list[str]:
    return [VOCAB[(len(prompt) + i) % len(VOCAB)] + " " for i in range(n)]


@dataclass
class Case:
    id: str
    service: type
    api: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    expect: Any = None


WHEN = dt.datetime(2024, 5, 1, 12, 30, 15, 250000, tzinfo=UTC)
TEN = " ".join(f"w{i}" for i in range(10))
CASES = [
    # examples/quickstart.py
    Case("summarize", Quickstart, "summarize", kwargs={"text": "a b c d", "max_words": 2},
         expect={"summary": "a b", "words": 4}),
    Case("summarize-default", Quickstart, "summarize", kwargs={"text": TEN},
         expect={"summary": " ".join(TEN.split()[:8]), "words": 10}),
    Case("summarize-positional", Quickstart, "summarize", args=("x y z", 1),
         expect={"summary": "x", "words": 3}),
    Case("upper-root", Quickstart, "upper", args=("héllo wörld",), expect="HÉLLO WÖRLD"),
    Case("upper-empty", Quickstart, "upper", args=("",), expect=""),
    Case("count-root", Quickstart, "count", args=("a bb ccc",),
         expect={"chars": 8, "words": 3}),
    Case("spell-stream", Quickstart, "spell", kwargs={"word": "abc"}, expect=["a", "b", "c"]),
    Case("spell-default", Quickstart, "spell", expect=list("tensorwire")),
    # examples/llm_stream.py
    Case("generate", LanguageModel, "generate", kwargs={"prompt": "hi", "max_tokens": 4},
         expect=words("hi", 4)),
    Case("generate-defaults", LanguageModel, "generate",
         expect=words("Explain superconductors in plain English", 16)),
    Case("agenerate", LanguageModel, "agenerate", kwargs={"prompt": "abc", "max_tokens": 5},
         expect=words("abc", 5)),
    # examples/constrained.py
    Case("complete", TextGenerator, "complete",
         kwargs={"prompt": "a b c", "temperature": 1.5, "max_tokens": 300},
         expect={"completion": "c b a", "temperature": 1.5, "max_tokens": 300}),
    Case("complete-defaults", TextGenerator, "complete", kwargs={"prompt": "hi there"},
         expect={"completion": "there hi", "temperature": 1.0, "max_tokens": 100}),
    # examples/models.py
    Case("analyze", ReviewAnalyzer, "analyze",
         kwargs={"params": {"text": "good shoes", "stars": 5, "tags": ["red", "xl"]}},
         expect={"sentiment": "positive", "score": 1.0, "words": 2,
                 "tags": {"red": 3, "xl": 2}}),
    Case("analyze-model", ReviewAnalyzer, "analyze",
         kwargs={"params": Review(text="meh", stars=3, posted=WHEN)},
         expect={"sentiment": "neutral", "score": 0.0, "words": 1, "tags": {}}),
    Case("analyze-negative", ReviewAnalyzer, "analyze",
         kwargs={"params": {"text": "bad", "stars": 1}},
         expect={"sentiment": "negative", "score": -1.0, "words": 1, "tags": {}}),
    Case("search-fuzzy", ReviewAnalyzer, "search", kwargs={"query": "red"},
         expect=["red shoes", "red hat"]),
    Case("search-top-k", ReviewAnalyzer, "search", kwargs={"query": "shoes hat", "top_k": 2},
         expect=["red shoes", "blue shoes"]),
    Case("search-exact", ReviewAnalyzer, "search",
         kwargs={"query": "blue hat", "mode": "exact"}, expect=["blue hat"]),
    Case("shout", ReviewAnalyzer, "shout", args=("quiet",), expect="QUIET"),
    Case("stats", ReviewAnalyzer, "stats", args=([1, 2.5, 4.5],),
         expect={"min": 1.0, "max": 4.5, "mean": 8 / 3}),
    # tests/e2e/clients/services.py: the standard types both ways
    Case("report", Kitchen, "report",
         kwargs={"items": [{"name": "a", "qty": 2, "when": WHEN, "tags": ["x"]},
                           Item(name="b", qty=3)],
                 "color": "green", "span": dt.timedelta(seconds=1.5),
                 "extra": {"k": [1, 2, {"deep": True}]}, "note": "n"},
         expect={"total": 5,
                 "items": [{"name": "a", "qty": 2, "when": WHEN, "tags": ["x"]},
                           {"name": "b", "qty": 3, "when": None, "tags": []}],
                 "longest": dt.timedelta(seconds=3), "colors": {"a": "green", "b": "green"},
                 "extra": {"k": [1, 2, {"deep": True}]}, "note": "n"}),
    Case("report-enum-member", Kitchen, "report",
         kwargs={"items": [{"name": "z", "qty": 0}], "color": Color.RED},
         expect={"total": 0, "items": [{"name": "z", "qty": 0, "when": None, "tags": []}],
                 "longest": dt.timedelta(seconds=2), "colors": {"z": "red"}, "extra": None,
                 "note": None}),
    Case("shift", Kitchen, "shift", kwargs={"when": WHEN, "by": dt.timedelta(hours=1)},
         expect=WHEN + dt.timedelta(hours=1)),
    Case("shift-strings", Kitchen, "shift",
         kwargs={"when": "2024-05-01T12:00:00Z", "by": 90},
         expect=dt.datetime(2024, 5, 1, 12, 1, 30, tzinfo=UTC)),
    Case("pick", Kitchen, "pick", kwargs={"mode": "slow"}, expect="red"),
    Case("pick-default", Kitchen, "pick", expect="green"),
    Case("digest-bytes", Kitchen, "digest", kwargs={"data": b"\x00\x01binary", "label": "b"},
         expect={"label": "b", "size": 8,
                 "sha1": hashlib.sha1(b"\x00\x01binary").hexdigest()}),
    Case("raw-size-root-bytes", Kitchen, "raw_size", args=(b"\xff" * 1000,), expect=1000),
    Case("echo-bytes", Kitchen, "echo_bytes", kwargs={"data": b"abc\x00"}, expect=b"\x00cba"),
    Case("nested", Kitchen, "nested",
         kwargs={"grid": [[1, 2], [3]], "table": {"b": [1.5], "a": []}},
         expect={"rows": 2, "sum": 6, "keys": ["a", "b"]}),
    Case("maybe-none", Kitchen, "maybe", expect=None),
    Case("maybe-value", Kitchen, "maybe", kwargs={"value": 21}, expect=42),
]




def _is_stream(client: Any, api: str) -> bool:
    return next(a for a in client.list_apis() if a.name == api).stream


def call_sync(url: str, case: Case) -> Any:
    with tensorwire.SyncClient(url) as client:
        result = getattr(client, case.api)(*case.args, **case.kwargs)
        return list(result) if _is_stream(client, case.api) else result


def call_async(url: str, case: Case) -> Any:
    async def main() -> Any:
        async with tensorwire.AsyncClient(url) as client:
            result = getattr(client, case.api)(*case.args, **case.kwargs)
            if _is_stream(client, case.api):
                return [chunk async for chunk in result]
            return await result

    return asyncio.run(main())


CALLERS = {"sync": call_sync, "async": call_async}


@pytest.mark.parametrize("client_kind", ["sync", "async"])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_example_answers_the_same(servers, case: Case, protocol: str, client_kind: str):
    url = url_of(servers[case.service], protocol)
    result = CALLERS[client_kind](url, case)
    assert typed(result) == typed(case.expect)  # types too: 300 is not 300.0
    if isinstance(case.expect, dt.datetime):
        assert result.utcoffset() == case.expect.utcoffset()


#: Modules of examples/ that serve nothing: the digits example's network and its training.
NOT_SERVICES = {"__init__", "digits_model", "train_digits"}
EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py") if p.stem not in NOT_SERVICES)
#: Every client table, and how to read the (service class, API name) pairs it calls.
TABLES: dict[str, Callable[[Any], set[tuple[type, str]]]] = {
    __name__: lambda m: {(c.service, c.api) for c in m.CASES},
    "tests.e2e.clients.test_tensors_table": lambda m: {(c[1], c[2]) for c in m.CALLS},
    "tests.e2e.clients.test_files_table": lambda m: {(c[1], c[0]) for c in m.CALLS},
    "tests.e2e.clients.test_tf_table": lambda m: {(m.TfOps, c[1]) for c in m.CALLS},
    "tests.e2e.clients.test_digits_table": lambda m: {(c[1], c[2]) for c in m.CALLS},
    "tests.e2e.clients.test_streams_in_table": lambda m: {(c[1], c[2]) for c in m.CALLS},
    "tests.e2e.clients.test_composed_table": lambda m: {(c[1], c[2]) for c in m.CALLS},
}
#: Examples whose APIs carry no docstring, and why.
UNDOCUMENTED = {"bentoml_distributed": "BentoML's own example, kept as BentoML wrote it"}


def _example(example: str) -> Any:
    """examples/<example>.py, or a skip where a framework it needs is not installed."""
    try:
        return importlib.import_module(f"examples.{example}")
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] in {"examples", "tensorwire", "tests"}:
            raise
        pytest.skip(f"examples/{example}.py needs {exc.name}")


def _services(module: Any) -> list[type]:
    """The @tensorwire.service classes a module defines (not those it imports)."""
    found = []
    for obj in vars(module).values():
        if isinstance(obj, type) and obj.__module__ == module.__name__:
            try:
                tensorwire.get_service_spec(obj)
            except TypeError:
                continue
            found.append(obj)
    return found


@pytest.mark.parametrize("example", EXAMPLES)
def test_the_tables_cover_every_api_of_every_example(example: str):
    """Every API of every service class in examples/*.py is called through the clients
    by one of the tables; an example that cannot load here (TensorFlow, torch, ... not
    installed) is skipped, as its table is."""
    from .test_errors import BAD

    services = _services(_example(example))
    assert services, f"examples/{example}.py defines no service"
    covered: set[tuple[type, str]] = set()
    skipped: list[str] = []
    for table, read in TABLES.items():
        try:
            covered |= read(importlib.import_module(table))
        except pytest.skip.Exception as exc:
            skipped.append(f"{table}: {exc}")
    by_design = {(c.service, c.api) for c in BAD if c.error is InternalError}
    missing = [f"{service.__name__}.{name}" for service in services
               for name in tensorwire.get_service_spec(service).apis
               if (service, name) not in covered | by_design]
    if missing and skipped:
        pytest.skip(f"{', '.join(missing)} only in tables skipped here: {'; '.join(skipped)}")
    assert not missing, f"not called by any client table: {', '.join(missing)}"


@pytest.mark.parametrize("example", EXAMPLES)
def test_list_apis_says_the_same_on_both_protocols(servers, example: str):
    """Docs, input and output type names of every example API: the HTTP contract
    (schema.json) and the gRPC one (reflection) describe them alike, required inputs
    included (the `(tensorwire.v1.required)` field option). Only the address differs."""
    for service in _services(_example(example)):
        infos = {}
        for protocol in ("http", "grpc"):
            with tensorwire.SyncClient(url_of(servers[service], protocol)) as client:
                infos[protocol] = [dataclasses.replace(a, address="")
                                   for a in client.list_apis()]
        assert infos["http"] == infos["grpc"]
        if example not in UNDOCUMENTED:
            assert all(a.doc for a in infos["grpc"]), "every example API has a docstring"
