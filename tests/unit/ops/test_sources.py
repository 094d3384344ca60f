"""Settings sources: defaults < TOML file < TENSORWIRE_* env < flags, one name each."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorwire.ops.cli import _parser, settings_from_args
from tensorwire.ops.sources import (
    ConfigError,
    load_settings,
    options,
    parse_size,
    read_config_file,
    settings_table,
)
from tensorwire.settings import MiB, Settings

ROOT = Path(__file__).resolve().parents[3]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tensorwire.toml"
    path.write_text(text)
    return path


def test_precedence_defaults_file_env_flags(tmp_path):
    cfg = write(tmp_path, 'workers = 2\nthreads = 3\nhost = "10.0.0.1"\nlog_level = "debug"\n')
    env = {"TENSORWIRE_THREADS": "5", "TENSORWIRE_HOST": "10.0.0.2"}
    s = load_settings({"host": "10.0.0.3", "workers": None}, env=env, config_file=cfg)
    assert s.workers == 2            # file over default
    assert s.threads == 5            # env over file
    assert s.host == "10.0.0.3"      # flag over env
    assert s.log_level == "debug"    # file, nothing above it
    assert s.grpc_port == Settings().grpc_port  # default


def test_secure_defaults():
    s = Settings()
    assert s.host == "127.0.0.1" and s.auth_token is None and not s.tls
    assert s.cors_origins == [] and s.workers == 1


def test_config_file_from_env_var(tmp_path):
    cfg = write(tmp_path, "max_concurrency = 7\n")
    assert load_settings(env={"TENSORWIRE_CONFIG": str(cfg)}).max_concurrency == 7


@pytest.mark.parametrize(("env", "field", "value"), [
    ({"TENSORWIRE_MAX_REQUEST_SIZE": "64KiB"}, "max_request_size", 64 * 1024),
    ({"TENSORWIRE_MAX_REQUEST_SIZE": "2MiB"}, "max_request_size", 2 * MiB),
    ({"TENSORWIRE_MAX_REQUEST_SIZE": "1000"}, "max_request_size", 1000),
    ({"TENSORWIRE_GRPC": "false"}, "grpc", False),
    ({"TENSORWIRE_ACCESS_LOG": "1"}, "access_log", True),
    ({"TENSORWIRE_METRICS": "yes"}, "metrics", True),
    ({"TENSORWIRE_CORS_ORIGINS": "https://a.example, https://b.example"}, "cors_origins",
     ["https://a.example", "https://b.example"]),
    ({"TENSORWIRE_REQUEST_TIMEOUT": "2.5"}, "request_timeout", 2.5),
    ({"TENSORWIRE_AUTH_TOKEN": "s3cret"}, "auth_token", "s3cret"),
    ({"TENSORWIRE_ROOT_PATH": "/models/iris"}, "root_path", "/models/iris"),
    ({"TENSORWIRE_AUTH_OPEN_DOCS": "on"}, "auth_open_docs", True),  # off by default
])
def test_env_values_are_parsed_by_type(env, field, value):
    assert getattr(load_settings(env=env), field) == value


@pytest.mark.parametrize(("env", "needle"), [
    ({"TENSORWIRE_WORKERS": "many"}, "TENSORWIRE_WORKERS"),
    ({"TENSORWIRE_HTTP": "maybe"}, "TENSORWIRE_HTTP"),
    ({"TENSORWIRE_MAX_REQUEST_SIZE": "big"}, "TENSORWIRE_MAX_REQUEST_SIZE"),
    ({"TENSORWIRE_WORKERS": "0"}, "workers"),
    ({"TENSORWIRE_LOG_FORMAT": "xml"}, "log_format"),
    ({"TENSORWIRE_TLS_CERT": "/x.pem"}, "tls_key"),
    ({"TENSORWIRE_HTTP_PORT": "70000"}, "http_port"),
    ({"TENSORWIRE_ROOT_PATH": "models/"}, "root_path"),
    ({"TENSORWIRE_ROOT_PATH": "/models/"}, "root_path"),
])
def test_bad_values_fail_naming_the_setting(env, needle):
    with pytest.raises(ConfigError, match=needle):
        load_settings(env=env)


def test_toml_types_and_errors(tmp_path):
    cfg = write(tmp_path, 'max_request_size = "8MiB"\ncors_origins = ["*"]\n'
                          'request_timeout = 3\nhttp = false\n')
    values = read_config_file(cfg)
    assert values == {"max_request_size": 8 * MiB, "cors_origins": ["*"],
                      "request_timeout": 3.0, "http": False}
    with pytest.raises(ConfigError, match="unknown setting 'wokers'"):
        read_config_file(write(tmp_path, "wokers = 2\n"))
    with pytest.raises(ConfigError, match="workers"):
        read_config_file(write(tmp_path, 'workers = true\n'))
    with pytest.raises(ConfigError, match="invalid TOML"):
        read_config_file(write(tmp_path, "workers = \n"))
    with pytest.raises(ConfigError, match="No such file"):
        read_config_file(tmp_path / "missing.toml")


def test_parse_size():
    assert parse_size("1k") == 1000
    assert parse_size("1 KiB") == 1024
    assert parse_size("1.5MiB") == int(1.5 * MiB)
    with pytest.raises(ValueError, match="size"):
        parse_size("lots")


def test_cli_flags_cover_every_setting(tmp_path, monkeypatch):
    for opt in options():
        monkeypatch.delenv(opt.env, raising=False)
    monkeypatch.delenv("TENSORWIRE_CONFIG", raising=False)
    cfg = write(tmp_path, "threads = 4\nworkers = 5\n")
    args = _parser().parse_args([
        "serve", "examples.quickstart:Quickstart", "--config", str(cfg), "--workers", "3",
        "--no-http", "--max-request-size", "1MiB", "--max-concurrency", "9",
        "--request-timeout", "1.5", "--cors-origins", "https://x.example",
        "--access-log", "--log-format", "json", "--auth-token", "t0k"])
    s = settings_from_args(args)
    assert (s.service, s.workers, s.threads, s.http, s.max_request_size) == (
        "examples.quickstart:Quickstart", 3, 4, False, MiB)
    assert (s.max_concurrency, s.request_timeout, s.cors_origins, s.access_log,
            s.log_format, s.auth_token) == (9, 1.5, ["https://x.example"], True, "json", "t0k")
    flags = {a.dest for a in _parser()._subparsers._group_actions[0].choices["serve"]._actions}
    assert {o.name for o in options()} <= flags


def test_bad_flag_value_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["serve", "x:Y", "--max-request-size", "huge"])
    assert exc.value.code == 2
    assert "max-request-size" in capsys.readouterr().err


def test_help_lists_every_flag(capsys):
    """`serve --help` formats every setting's help (a bare `%` in one crashed it)."""
    with pytest.raises(SystemExit) as exc:
        _parser().parse_args(["serve", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--grpc-max-connection-age" in out and "10 % jitter" in out
    assert all(opt.flag in out for opt in options() if not opt.positional)


def test_the_token_stays_out_of_repr():
    s = Settings(auth_token="do-not-print-me")
    assert "do-not-print-me" not in repr(s)


def test_the_settings_reference_is_generated_from_the_registry():
    """docs/reference/settings.md holds a marker the docs build fills with this table
    (tools/docs_hooks.py), so the published reference cannot go stale."""
    from tools.docs_hooks import expand

    page = (ROOT / "docs" / "reference" / "settings.md").read_text()
    assert "<!-- generated: settings -->" in page
    assert settings_table() in expand(page)
    assert all(f"`{opt.env}`" in expand(page) for opt in options())


def test_root_path_from_a_flag_and_a_config_file(tmp_path):
    cfg = write(tmp_path, 'root_path = "/from/file"\n')
    assert load_settings(env={"TENSORWIRE_CONFIG": str(cfg)}).root_path == "/from/file"
    args = _parser().parse_args(["serve", "m:C", "--root-path", "/from/flag"])
    assert settings_from_args(args).root_path == "/from/flag"
