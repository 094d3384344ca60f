"""`tensorwire serve | proto | openapi MODULE:Class`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from .. import v1
from ..http.schema import openapi
from ..settings import Settings
from ..telemetry import logs
from .contract import lock_problem, proto_command
from .loader import LoadError, load_service
from .serve import serve_forever
from .sources import ConfigError, add_flags, flag_values, load_settings
from .supervisor import Supervisor

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tensorwire", description="Serve typed Python model APIs over gRPC and HTTP.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser(
        "serve", help="serve a service over HTTP and gRPC",
        description="Every option is also an env var (TENSORWIRE_<NAME>) and a key of the "
                    "--config TOML file; precedence: defaults < file < env < flags.")
    serve.add_argument("--config", default=None, metavar="FILE",
                       help="TOML config file (env TENSORWIRE_CONFIG)")
    add_flags(serve)

    proto = sub.add_parser("proto", help="print the service's .proto")
    proto.add_argument("target", help="MODULE:Class or path/to/file.py:Class")
    proto.add_argument("--types", action="store_true",
                       help="print tensorwire/v1/types.proto instead")
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
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Flags over env over config file over defaults (raises ConfigError)."""
    return load_settings(flag_values(args), config_file=args.config)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings: Settings | None = None
    try:
        if args.command == "proto" and args.types:
            sys.stdout.write(v1.proto_source())
            return 0
        target = getattr(args, "target", None)
        if args.command == "serve":
            settings = settings_from_args(args)
            target = settings.service
            if not target:
                raise LoadError("name the service: tensorwire serve MODULE:Class (or set "
                                "TENSORWIRE_SERVICE)")
        spec = load_service(target)
    except (ConfigError, LoadError) as exc:
        print(f"tensorwire: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TypeError as exc:  # the service's contract is invalid
        print(f"tensorwire: error: invalid service: {exc}", file=sys.stderr)
        return EXIT_USAGE

    if args.command == "proto":
        return proto_command(spec, against=args.against, check_dir=args.check, out=args.out)
    if args.command == "openapi":
        sys.stdout.write(json.dumps(openapi(spec), indent=2) + "\n")
        return 0

    assert settings is not None
    problem = lock_problem(spec, settings.proto_lock) if settings.grpc else None
    if problem is not None:  # before any worker starts: one clear line, exit 2
        print(f"tensorwire: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if not (settings.http or settings.grpc):
        print("tensorwire: error: --no-http and --no-grpc leave nothing to serve",
              file=sys.stderr)
        return EXIT_USAGE
    logs.configure(settings.log_level, settings.log_format)
    if settings.workers > 1:
        return Supervisor(settings).run()
    try:
        asyncio.run(serve_forever(spec, settings))
    except OSError as exc:
        print(f"tensorwire: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
