"""The `dependencies` setting: a flag given several times, an env var, a TOML list, all
`NAME=URL`, refused with its name when malformed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorwire.ops.cli import _parser, settings_from_args
from tensorwire.ops.sources import ConfigError, load_settings, options


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for opt in options():
        monkeypatch.delenv(opt.env, raising=False)
    monkeypatch.delenv("TENSORWIRE_CONFIG", raising=False)


def test_the_flag_repeats_and_takes_commas() -> None:
    args = _parser().parse_args([
        "serve", "tests.support.composed_services:Pipeline",
        "--dependency", "Model=grpc://model:50051",
        "--dependency", "Ranker=dns:///ranker.ns.svc:50051,Tagger=http://tagger:3000"])
    assert settings_from_args(args).dependencies == [
        "Model=grpc://model:50051", "Ranker=dns:///ranker.ns.svc:50051",
        "Tagger=http://tagger:3000"]


def test_env_and_toml_alike(tmp_path: Path) -> None:
    env = {"TENSORWIRE_DEPENDENCIES": "Model=grpc://model:50051"}
    assert load_settings({}, env=env).dependencies == ["Model=grpc://model:50051"]
    config = tmp_path / "tensorwire.toml"
    config.write_text('dependencies = ["Model=grpc://model:50051"]\n')
    assert load_settings({}, env={}, config_file=config).dependencies == [
        "Model=grpc://model:50051"]


@pytest.mark.parametrize("entry", ["Model", "Model=model:50051", "=grpc://m:1",
                                   "Model=ftp://m:1"])
def test_a_malformed_entry_names_the_setting(entry: str) -> None:
    with pytest.raises(ConfigError, match=r"dependencies: .* is not NAME=URL"):
        load_settings({"dependencies": [entry]}, env={})


def test_serve_refuses_a_placement_that_names_no_dependency(
        capsys: pytest.CaptureFixture[str]) -> None:
    from tensorwire.ops.cli import main

    code = main(["serve", "tests.support.composed_services:Pipeline",
                 "--dependency", "Modle=grpc://model:50051"])
    assert code == 2
    assert ("--dependency Modle: no service served here depends on Modle (its "
            "dependencies: Model)") in capsys.readouterr().err
