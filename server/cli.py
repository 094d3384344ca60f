"""`tensorwire serve | proto | openapi MODULE:Class`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence

from .loader import LoadError, load_service
from .settings import Settings

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tensorwire", description="Serve typed Python model APIs over gRPC and HTTP.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="serve a service over HTTP and gRPC")
    serve.add_argument("target", help="MODULE:Class or path/to/file.py:Class")
    serve.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    serve.add_argument("--http-port", type=int, default=None, help="HTTP port (default 3000)")
    serve.add_argument("--grpc-port", type=int, default=None, help="gRPC port (default 50051)")
    serve.add_argument("--no-http", action="store_true", help="serve gRPC only")
    serve.add_argument("--no-grpc", action="store_true", help="serve HTTP only")
    serve.add_argument("--workers", type=int, default=None, help="worker processes (default 1)")
    serve.add_argument("--threads", type=int, default=None,
                       help="threads for sync (def) API methods (default 8)")
    serve.add_argument("--max-request-size", type=int, default=None,
                       help="largest request in bytes (default 100 MiB)")
    serve.add_argument("--graceful-timeout", type=float, default=None,
                       help="seconds in-flight requests get after SIGTERM (default 30)")
    serve.add_argument("--log-level", default=None,
                       choices=["debug", "info", "warning", "error"], help="log level")

    proto = sub.add_parser("proto", help="print the service's .proto")
    proto.add_argument("target", help="MODULE:Class or path/to/file.py:Class")
    proto.add_argument("--types", action="store_true",
                       help="print tensorwire/v1/types.proto instead")

    oa = sub.add_parser("openapi", help="print the service's OpenAPI 3.1 document")
    oa.add_argument("target", help="MODULE:Class or path/to/file.py:Class")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    s = Settings()
    for name in ("host", "http_port", "grpc_port", "workers", "threads", "max_request_size",
                 "graceful_timeout", "log_level"):
        value = getattr(args, name, None)
        if value is not None:
            setattr(s, name, value)
    if args.no_http:
        s.http = False
    if args.no_grpc:
        s.grpc = False
    return s


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "proto" and args.types:
            from . import v1

            sys.stdout.write(v1.proto_source())
            return 0
        spec = load_service(args.target)
    except LoadError as exc:
        print(f"tensorwire: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except TypeError as exc:  # the service's contract is invalid
        print(f"tensorwire: error: invalid service: {exc}", file=sys.stderr)
        return EXIT_USAGE

    if args.command == "proto":
        from .protogen import service_proto

        sys.stdout.write(service_proto(spec).proto_text())
        return 0
    if args.command == "openapi":
        from .schema import openapi

        sys.stdout.write(json.dumps(openapi(spec), indent=2) + "\n")
        return 0

    settings = settings_from_args(args)
    if not (settings.http or settings.grpc):
        print("tensorwire: error: --no-http and --no-grpc leave nothing to serve",
              file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from .serve import serve_forever

    try:
        asyncio.run(serve_forever(spec, settings))
    except OSError as exc:
        print(f"tensorwire: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
