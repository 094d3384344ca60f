"""The command line's own mistakes: each is reported by the parser of its command."""

from __future__ import annotations

import pytest

from tensorwire.ops.cli import parse


def error_of(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        parse(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_a_bad_flag_after_serve_shows_serves_usage_and_the_likely_flag(capsys):
    err = error_of(["serve", "examples.quickstart:Quickstart", "--http-prot", "3001"], capsys)
    assert err.startswith("usage: tensorwire serve [options]")
    assert "tensorwire serve: error: unrecognized arguments: --http-prot 3001" in err
    assert "did you mean --http-port?" in err
    assert "{serve,proto,openapi}" not in err  # not the top-level usage
    assert len(err.splitlines()) == 2  # not the 45 options' usage


def test_a_bad_flag_after_proto_shows_protos_usage(capsys):
    err = error_of(["proto", "m:C", "--chek", "dir"], capsys)
    assert "tensorwire proto: error: unrecognized arguments: --chek dir" in err
    assert "did you mean --check?" in err


def test_good_command_lines_still_parse():
    args = parse(["serve", "m:C", "--http-port", "3001", "--no-grpc"])
    assert (args.service, args.http_port, args.grpc) == (["m:C"], 3001, False)


def test_several_targets_are_the_service_and_the_services_after_it():
    from tensorwire.ops.sources import flag_values

    values = flag_values(parse(["serve", "a:A", "iris=b:B", "--no-grpc"]))
    assert values["service"] == "a:A"
    assert values["services"] == [{"target": "iris=b:B"}]
    one = flag_values(parse(["serve", "a:A"]))
    assert (one["service"], one["services"]) == ("a:A", [])  # replaces the config's list
    none = flag_values(parse(["serve", "--no-grpc"]))
    assert none["service"] is None and "services" not in none
