"""`tensorwire serve | proto | openapi MODULE:Class`, `tensorwire proto --types | --oip`,
and `tensorwire --version`.

Exit codes: 0 done; 1 the server could not run (a port that does not bind, an exception
in the service's module or `__init__`: its traceback is shown under one line naming the
service and the phase); 2 a usage mistake (a bad target, setting or contract: one line).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import inference, v1
from ..contract.options import read_service_options
from ..http.schema import openapi
from ..runtime.service import InitFailure
from ..security.tls import http_context
from ..settings import Settings
from ..telemetry import logs, tracing
from ..version import __version__
from . import loops
from .contract import lock_problem, proto_command
from .hosting import load_specs, placed, service_entries
from .loader import ImportFailure, LoadError, failure_report, load_service, source_dir
from .ports import BindError
from .reload import Reloader
from .serve import serve_forever
from .sources import ConfigError, add_flags, explicit_values, flag_values, load_settings
from .supervisor import Supervisor

EXIT_FAILED = 1
EXIT_USAGE = 2

log = logging.getLogger("tensorwire.serve")


def _parser() -> argparse.ArgumentParser:
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and each command's own."""
    parser = argparse.ArgumentParser(
        prog="tensorwire", description="Serve typed Python model APIs over gRPC and HTTP.")
    parser.add_argument("--version", action="version", version=f"tensorwire {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve", help="serve a service over HTTP and gRPC",
        # argparse's own usage line lists all 45 options: 37 lines above a typo's error
        usage="%(prog)s [options] [[PREFIX=]MODULE:Class | path/to/file.py:Class ...]",
        description="Every option is also an env var (TENSORWIRE_<NAME>) and a key of the "
                    "--config TOML file; precedence: defaults < @service options < file < "
                    "env < flags.")
    serve.add_argument("--config", default=None, metavar="FILE",
                       help="TOML config file (env TENSORWIRE_CONFIG)")
    add_flags(serve)

    proto = sub.add_parser("proto", help="print the service's .proto")
    proto.add_argument("target", nargs="?", help="MODULE:Class or path/to/file.py:Class")
    proto.add_argument("--types", action="store_true",
                       help="print tensorwire/v1/types.proto instead (no target needed)")
    proto.add_argument("--oip", action="store_true",
                       help="print inference/grpc_service.proto instead: the Open Inference "
                            "Protocol as Triton extends it, every rpc tensorwire serves on "
                            "the same port (no target needed; with --out DIR, write it and "
                            "the model_config.proto it imports into DIR/inference/)")
    proto.add_argument("--against", metavar="DIR", default=None,
                       help="keep the field numbers of the contract published in DIR")
    contract = proto.add_mutually_exclusive_group()
    contract.add_argument("--out", metavar="DIR", default=None,
                          help="write the contract tree into DIR (the .proto, its "
                               ".schema.json and tensorwire/v1/types.proto)")
    contract.add_argument("--check", metavar="DIR", default=None,
                          help="exit 1 if the contract breaks clients of the one "
                               "published in DIR (buf breaking + JSON-side rules)")

    oa = sub.add_parser("openapi", help="print the service's OpenAPI 3.1 document")
    oa.add_argument("target", help="MODULE:Class or path/to/file.py:Class")
    return parser, {"serve": serve, "proto": proto, "openapi": oa}


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Flags over env over config file over defaults (raises ConfigError)."""
    return load_settings(flag_values(args), config_file=args.config)


def _error(message: str) -> None:
    print(f"tensorwire: error: {message}", file=sys.stderr)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, each mistake reported by the parser of its own command.

    argparse hands a subcommand's unknown arguments up to the top-level parser, whose
    error shows `tensorwire [-h] [--version] {serve,proto,openapi} ...`: no help for a
    typo after `serve`. Here the command's parser reports them, with its usage and the
    option that was probably meant.
    """
    parser, commands = _build()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "serve" and unknown:  # targets after options: still targets
        targets = [a for a in unknown if not a.startswith("-")]
        if targets and len(targets) == len(unknown):
            args.service = [*(args.service or ()), *targets]
            unknown = []
    if unknown:
        command = commands[args.command]
        known = [flag for action in command._actions for flag in action.option_strings]
        close = [m for arg in unknown if arg.startswith("--")
                 for m in difflib.get_close_matches(arg.split("=", 1)[0], known, n=1)]
        hint = f" (did you mean {close[0]}?)" if close else ""
        command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}; "
                      f"see tensorwire {args.command} --help")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "proto" and args.types:
        sys.stdout.write(v1.proto_source())
        return 0
    if args.command == "proto" and args.oip:
        if args.target or args.types or args.against or args.check:
            _error("--oip prints the Open Inference Protocol's .proto: it takes no target "
                   "and no --types, --against or --check")
            return EXIT_USAGE
        return _oip_proto(args.out)
    if args.target is None:
        _error(f"name the service: tensorwire {args.command} MODULE:Class"
               + (" (or --types for tensorwire/v1/types.proto)"
                  if args.command == "proto" else ""))
        return EXIT_USAGE
    try:
        spec = load_service(args.target)
    except ImportFailure as exc:
        _error(failure_report(exc))
        return EXIT_FAILED
    except LoadError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except TypeError as exc:  # the service's contract is invalid
        _error(f"invalid service: {exc}")
        return EXIT_USAGE
    if args.command == "proto":
        return proto_command(spec, against=args.against, check_dir=args.check, out=args.out)
    sys.stdout.write(json.dumps(openapi(spec), indent=2) + "\n")
    return 0


def _serve(args: argparse.Namespace) -> int:
    """Load, layer the (first) service's own options under the operator's settings,
    serve."""
    flags = flag_values(args)
    try:
        explicit = explicit_values(flags, config_file=args.config)
        operator = load_settings(flags, config_file=args.config)
        entries = service_entries(operator)
        if not entries:
            raise LoadError("name the service: tensorwire serve MODULE:Class (or set "
                            "TENSORWIRE_SERVICE, or [[services]] in the config file)")
    except (ConfigError, LoadError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    logs.configure(operator.log_level, operator.log_format)
    if not (operator.http or operator.grpc):
        _error("--no-http and --no-grpc leave nothing to serve")
        return EXIT_USAGE
    if (problem := _loop_problem(operator)) is not None:
        _error(problem)
        return EXIT_USAGE
    if operator.reload:
        if (problem := _tls_problem(operator)) is not None:
            _error(problem)
            return EXIT_USAGE
        return _reload(operator, set(explicit), entries[0].target)
    try:
        specs = load_specs(entries)
        spec = specs[0]
        options = read_service_options(spec.config, spec.cls.__qualname__)
        settings = load_settings(flags, config_file=args.config, service=options.settings)
        services = placed(specs, service_entries(settings), settings)
    except ImportFailure as exc:
        log.error("%s", failure_report(exc))
        return EXIT_FAILED
    except (ConfigError, LoadError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except TypeError as exc:  # the service's contract is invalid
        _error(f"invalid service: {exc}")
        return EXIT_USAGE
    for path, why in options.ignored:
        log.warning("@service option %s is ignored: %s", path, why)
    for other in specs[1:]:
        for path in read_service_options(other.config, other.cls.__qualname__).settings:
            log.warning("@service option %s of %s is ignored: the first service's set the "
                        "server; give a service its own threads, request_timeout or "
                        "batch_queue_items in its [[services]] table", path, other.name)
    for other in specs if settings.grpc else ():
        problem = lock_problem(other, settings.proto_lock)
        if problem is not None:  # before any worker starts: one clear line, exit 2
            _error(problem)
            return EXIT_USAGE
    try:
        tracing.require(settings)
    except tracing.TracingUnavailable as exc:
        _error(str(exc))
        return EXIT_USAGE
    if (problem := _loop_problem(settings)) is not None:  # the service may name one
        _error(problem)
        return EXIT_USAGE
    if (problem := _tls_problem(settings)) is not None:
        _error(problem)
        return EXIT_USAGE
    if settings.workers > 1:
        return Supervisor(settings).run()
    try:
        loops.run(serve_forever(services, settings), settings.loop)
    except tracing.TracingUnavailable as exc:  # e.g. OTEL_TRACES_EXPORTER names no exporter
        _error(str(exc))
        return EXIT_USAGE
    except BindError as exc:
        _error(str(exc))
        return EXIT_FAILED
    except InitFailure as exc:
        log.error("%s", failure_report(exc))
        return EXIT_FAILED
    return 0


def _oip_proto(out: str | None) -> int:
    """`tensorwire proto --oip`: the .proto of `inference.GRPCInferenceService` for
    clients to compile (printed, or written with the file it imports)."""
    if out is None:
        sys.stdout.write(inference.proto_source())
        return 0
    for name in (inference.PROTO_NAME, inference.CONFIG_PROTO_NAME):
        path = Path(out) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(inference.proto_source(name), encoding="utf-8")
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _tls_problem(settings: Settings) -> str | None:
    """Why the TLS certificate and key cannot serve (a file missing or unreadable, a key
    that is not the certificate's): said once, before the model loads or any worker
    starts, rather than as a traceback from every worker. The same check serves gRPC,
    which takes the same pair."""
    try:
        http_context(settings)
    except OSError as exc:
        return str(exc)
    return None


def _loop_problem(settings: Settings) -> str | None:
    """Why the loop `settings` names cannot run here (uvloop asked for, not installed):
    said once before any worker starts, rather than by every worker as it dies."""
    try:
        loops.resolve(settings.loop)
    except loops.LoopUnavailable as exc:
        return str(exc)
    return None


def _reload(operator: Settings, explicit: set[str], first: str) -> int:
    """`--reload`: one worker process, restarted on every change to the service's folder.

    The service is not imported here: the worker imports it (and applies its @service
    options) afresh on each start, so a mistake being fixed only costs a restart.
    """
    if operator.workers > 1:
        _error("--reload runs one worker (it is for development); drop --workers")
        return EXIT_USAGE
    try:
        folder = source_dir(first)
    except LoadError as exc:
        _error(str(exc))
        return EXIT_USAGE
    return Reloader(dataclasses.replace(operator, workers=1), explicit, folder).run()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
