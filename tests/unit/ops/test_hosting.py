"""`tensorwire.ops.hosting`: the services a server is told to serve, their options, and
the clashes refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

import tensorwire
from tensorwire.ops.hosting import clash, describe, placed, service_entries
from tensorwire.ops.sources import ConfigError, load_settings
from tensorwire.runtime.hosted import Placement
from tensorwire.settings import Settings
from tests.support.many_services import Flowers, FlowersAgain, RowSums, Wine


def test_the_service_then_the_services_each_with_its_options(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('service = "iris=tests.support.many_services:Flowers"\n'
                      '[[services]]\ntarget = "tests.support.many_services:Wine"\n'
                      'prefix = "wine"\nthreads = 3\nrequest_timeout = 7.5\n')
    settings = load_settings(config_file=config, env={})
    first, second = service_entries(settings)
    assert (first.target, first.prefix, first.load) == (
        "tests.support.many_services:Flowers", "iris", True)
    assert (second.prefix, second.overrides) == ("wine", {"threads": 3,
                                                          "request_timeout": 7.5})
    own = second.placement(settings).settings
    assert own is not None and (own.threads, own.request_timeout) == (3, 7.5)
    assert first.placement(settings).settings is None  # the server's
    assert describe(settings) == ("iris=tests.support.many_services:Flowers + "
                                  "tests.support.many_services:Wine")


def test_command_line_targets_replace_the_config_files(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[[services]]\ntarget = "tests.support.many_services:Wine"\n')
    settings = load_settings({"service": "a:A", "services": []}, config_file=config, env={})
    assert [e.target for e in service_entries(settings)] == ["a:A"]


@pytest.mark.parametrize(("entry", "said"), [
    ({"target": "a:A", "prefix": "a/b"}, "prefix 'a/b' must be letters"),
    ({"target": "a:A", "prefix": "metrics"}, "a path the server serves itself"),
    ({"target": "a:A", "colour": "red"}, "unknown key 'colour'"),
    ({"prefix": "x"}, "target must be MODULE:Class"),
    ({"target": "a:A", "threads": 0}, "threads must be at least 1"),
    ({"target": "a:A", "load": "no"}, "load must be true or false"),
])
def test_a_bad_entry_is_one_message_naming_it(entry: dict, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        service_entries(Settings(services=[entry]))
    assert said in str(caught.value) and "services[0]" in str(caught.value)


def test_a_config_file_with_services_that_are_not_tables(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('services = "a:A"\n')
    with pytest.raises(ConfigError, match=r"services: expected \[\[services\]\] tables"):
        load_settings(config_file=config, env={})


def test_clashes_name_both_services_and_a_prefix_resolves_them() -> None:
    flowers, wine = (tensorwire.get_service_spec(c) for c in (Flowers, Wine))
    problem = clash([(flowers, Placement(target="f:F")), (wine, Placement(target="w:W"))])
    assert problem is not None and problem.startswith(
        "HTTP route POST /predict is declared by both f:F.predict and w:W.predict")
    assert clash([(flowers, Placement(target="f:F")),
                  (wine, Placement(prefix="wine", target="w:W"))]) is None
    # a prefix that makes a v2 name equal to another's: `wine.predict` twice
    rows = tensorwire.get_service_spec(RowSums)
    assert clash([(rows, Placement()), (flowers, Placement(prefix="x"))]) is None
    again = tensorwire.get_service_spec(FlowersAgain)
    problem = clash([(flowers, Placement()), (again, Placement(prefix="y"))])
    assert problem is not None and problem.startswith(
        "gRPC service many.iris.Flowers is declared by both")


def test_placed_refuses_a_clash_as_a_config_error() -> None:
    specs = [tensorwire.get_service_spec(c) for c in (Flowers, Wine)]
    entries = service_entries(Settings(service="f:F", services=[{"target": "w:W"}]))
    with pytest.raises(ConfigError, match="declared by both"):
        placed(specs, entries, Settings())
