"""Where settings come from: defaults < the service's @service options < TOML config file
< `TENSORWIRE_*` env < flags.

Every documented field of `Settings` is one setting with one name in each source:
`max_request_size` is the TOML key, `TENSORWIRE_MAX_REQUEST_SIZE` the env var and
`--max-request-size` the flag. Strings from env/flags are parsed by the field's type
(sizes accept `KiB`/`MiB`/`GiB` suffixes, booleans `1/true/yes/on`, lists commas), so a
typo fails start-up with a message naming the setting instead of serving wrongly.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..settings import Settings

ENV_PREFIX = "TENSORWIRE_"
CONFIG_ENV = "TENSORWIRE_CONFIG"
#: The config file's list of more services (`[[services]]`), and the command line's.
SERVICES = "services"

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2,
          "mib": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "ki": 1024,
          "mi": 1024**2, "gi": 1024**3}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class ConfigError(ValueError):
    """A setting's value is unusable; the message names its source and the setting."""


@dataclasses.dataclass(frozen=True)
class Option:
    """One setting as every source names it."""

    name: str
    kind: str  # "str" "int" "size" "float" "bool" "list"
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    positional: bool = False
    secret: bool = False
    metavar: str | None = None
    #: Other flag names (`--port` for `--http-port`, as uvicorn and BentoML call it).
    aliases: tuple[str, ...] = ()
    #: A list whose flag may be given several times, each adding to it.
    repeat: bool = False

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def options() -> list[Option]:
    """The documented settings, in declaration order."""
    hints = typing.get_type_hints(Settings)
    out = []
    for f in dataclasses.fields(Settings):
        if "help" not in f.metadata:
            continue
        hint = hints[f.name]
        meta = f.metadata
        if meta.get("size"):
            kind = "size"
        elif hint is bool:
            kind = "bool"
        elif hint is int:
            kind = "int"
        elif hint is float:
            kind = "float"
        elif typing.get_origin(hint) is list:
            kind = "list"
        else:
            kind = "str"
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out.append(Option(f.name, kind, default, meta["help"], meta.get("choices"),
                          meta.get("positional", False), meta.get("secret", False),
                          meta.get("metavar"), tuple(meta.get("aliases", ())),
                          meta.get("repeat", False)))
    return out


def parse_size(text: str) -> int:
    m = _SIZE.fullmatch(text)
    if not m:
        raise ValueError(f"expected a size such as 1048576, 64KiB or 100MiB, got {text!r}")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


def _parse(opt: Option, text: str) -> Any:
    """A setting's value from a string (env var or flag)."""
    if opt.kind == "size":
        return parse_size(text)
    if opt.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"expected an integer, got {text!r}") from None
    if opt.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {text!r}") from None
    if opt.kind == "bool":
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"expected true/false, got {text!r}")
    if opt.kind == "list":
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


def _from_toml(opt: Option, value: Any) -> Any:
    """A setting's value from a TOML value: native types, or strings parsed as env."""
    if isinstance(value, str) and opt.kind != "str":
        return _parse(opt, value)
    expected: dict[str, tuple[type, ...]] = {
        "size": (int,), "int": (int,), "float": (int, float), "bool": (bool,),
        "list": (list,), "str": (str,)}
    types = expected[opt.kind]
    if isinstance(value, bool) and bool not in types:
        raise ValueError(f"expected {opt.kind}, got {value!r}")
    if not isinstance(value, types):
        raise ValueError(f"expected {opt.kind}, got {value!r}")
    if opt.kind == "list" and not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of strings")
    return float(value) if opt.kind == "float" else value


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Settings from a TOML file: top-level keys named like the Settings fields."""
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: invalid TOML: {exc}") from None
    by_name = {o.name: o for o in options()}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key == SERVICES:  # [[services]] tables, checked by tensorwire.ops.hosting
            if not isinstance(value, list):
                raise ConfigError(f"config file {path}: services: expected [[services]] "
                                  "tables")
            values[key] = value
            continue
        opt = by_name.get(key)
        if opt is None:
            raise ConfigError(f"config file {path}: unknown setting {key!r} (known: "
                              f"{', '.join([*by_name, SERVICES])})")
        try:
            values[key] = _from_toml(opt, value)
        except ValueError as exc:
            raise ConfigError(f"config file {path}: {key}: {exc}") from None
    return values


def read_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for opt in options():
        text = env.get(opt.env)
        if text is None or (text == "" and opt.default is None):
            continue  # unset; an empty optional (`TOKEN=` in compose) counts as unset
        try:
            values[opt.name] = _parse(opt, text)
        except ValueError as exc:
            raise ConfigError(f"{opt.env}: {exc}") from None
    return values


def explicit_values(flags: Mapping[str, Any] | None = None,
                    env: Mapping[str, str] | None = None,
                    config_file: str | Path | None = None) -> dict[str, Any]:
    """The settings the operator gave (config file < env < flags), parsed, unvalidated.

    Their names tell which settings a service's `@service(...)` options may still set.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file or env.get(CONFIG_ENV)
    if path:
        values.update(read_config_file(path))
    values.update(read_env(env))
    values.update({k: v for k, v in (flags or {}).items() if v is not None})
    return values


def load_settings(flags: Mapping[str, Any] | None = None,
                  env: Mapping[str, str] | None = None,
                  config_file: str | Path | None = None,
                  service: Mapping[str, Any] | None = None) -> Settings:
    """Layer the sources (defaults < @service options < file < env < flags) into
    validated Settings.

    `flags` holds already-parsed values; None means "not given". The config file is
    `config_file`, else `$TENSORWIRE_CONFIG`, else none. `service`: the settings the
    service's own `@service(...)` options ask for (`read_service_options`): the code's
    defaults, which any explicit setting of the operator overrides.
    """
    values = {**(service or {}), **explicit_values(flags, env, config_file)}
    try:
        return Settings(**values).validate()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


# --------------------------------------------------------------------------- CLI
def add_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (`--name`, booleans `--name/--no-name`), all default None
    so that an absent flag leaves the lower layers' value."""
    for opt in options():
        if opt.positional:  # one or more targets: the first is `service`, the rest `services`
            parser.add_argument(opt.name, nargs="*", default=None, metavar="TARGET",
                                help=_escaped(f"{opt.help} (env {opt.env})"))
            continue
        helptext = _escaped(f"{opt.help} (env {opt.env}; default {_show(opt.default)})")
        if opt.kind == "bool":
            parser.add_argument(opt.flag, action=argparse.BooleanOptionalAction,
                                default=None, help=helptext)
            continue
        parser.add_argument(opt.flag, *opt.aliases, dest=opt.name, default=None,
                            choices=opt.choices, action="extend" if opt.repeat else None,
                            type=_flag_type(opt), help=helptext,
                            metavar=None if opt.choices else (opt.metavar or opt.kind.upper()))


def _escaped(text: str) -> str:
    """`text` as argparse's help: it %-formats every help string (`10 %` would crash
    `--help`)."""
    return text.replace("%", "%%")


def _flag_type(opt: Option):
    def convert(text: str) -> Any:
        try:
            return _parse(opt, text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = opt.kind  # argparse names the type in its error message
    return convert


def flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The flags' values (None: not given). Targets on the command line are `service`
    and, after it, `services`: together they replace the config file's."""
    values = {o.name: getattr(args, o.name, None) for o in options()}
    targets = [t for o in options() if o.positional for t in values[o.name] or ()]
    for o in options():
        if o.positional:
            values[o.name] = targets[0] if targets else None
    if targets:
        values[SERVICES] = [{"target": t} for t in targets[1:]]
    return values


# -------------------------------------------------------------------------- docs
def _show(value: Any) -> str:
    if value is None or value == "" or value == []:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and value >= 1024 * 1024 and value % (1024 * 1024) == 0:
        return f"{value // (1024 * 1024)}MiB"
    return str(value)


def settings_table() -> str:
    """The README's table of every setting (a test keeps the README in sync)."""
    rows = ["| flag | env var | TOML key | default | meaning |",
            "|---|---|---|---|---|"]
    for opt in options():
        flag = "`TARGET` (positional)" if opt.positional else (
            f"`{opt.flag}` / `--no-{opt.flag[2:]}`" if opt.kind == "bool" else f"`{opt.flag}`")
        flag += "".join(f" (`{alias}`)" for alias in opt.aliases)
        meaning = opt.help.replace("|", "\\|")
        if opt.choices:
            meaning += f" ({' / '.join(opt.choices)})"
        rows.append(f"| {flag} | `{opt.env}` | `{opt.name}` | `{_show(opt.default)}` | "
                    f"{meaning} |")
    rows.append(f"| `--config` | `{CONFIG_ENV}` | | none | the TOML config file to read |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover - `python -m tensorwire.ops.sources` prints the table
    print(settings_table(), end="")
