"""The one error model: every failure is one of these, mapped once to HTTP and gRPC.

Transports never choose a status themselves; they read `http_status` and `grpc_code`
off the error. The gRPC code is kept as the `grpc.StatusCode` *name* so that this module
(and `import tensorwire`) needs no grpc import. Clients rebuild the same classes from a
status with `error_from_http` / `error_from_grpc`, so a caller catches one type whatever
the protocol.
"""

from __future__ import annotations

import errno
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, TypedDict


class FieldViolation(TypedDict, total=False):
    """One invalid input: where (`loc`, a path of names/indexes) and why (`msg`)."""

    loc: list[str | int]
    msg: str
    type: str


class TensorwireError(Exception):
    """Base of every error tensorwire raises or reports; user code may raise them too."""

    http_status: ClassVar[int] = 500
    grpc_code: ClassVar[str] = "INTERNAL"
    #: Whether the message is safe to show a client (user exceptions are not).
    public: ClassVar[bool] = True

    def __init__(
        self,
        message: str | None = None,
        *,
        detail: Sequence[FieldViolation] | None = None,
        headers: Mapping[str, str] | None = None,
        status: int | None = None,
    ) -> None:
        self.message = message or self.default_message()
        self.detail: list[FieldViolation] = list(detail or [])
        self.headers: dict[str, str] = dict(headers or {})
        if status is not None:
            # Clients record the exact status they got back (e.g. 405 for a NotFound-family).
            self.status = status
        super().__init__(self.message)

    @classmethod
    def default_message(cls) -> str:
        return cls.__doc__.strip().splitlines()[0].rstrip(".") if cls.__doc__ else cls.__name__

    @property
    def status_code(self) -> int:
        return getattr(self, "status", self.http_status)

    def to_dict(self) -> dict[str, Any]:
        """The JSON error body: `{"error": message, "detail": [{"loc", "msg", "type"}]}`."""
        body: dict[str, Any] = {"error": self.message}
        if self.detail:
            body["detail"] = self.detail
        return body

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, detail={self.detail!r})"


class InvalidArgument(TensorwireError):
    """The input is invalid."""

    http_status = 400
    grpc_code = "INVALID_ARGUMENT"

    @classmethod
    def at(cls, loc: Iterable[str | int], msg: str, type: str = "value_error") -> InvalidArgument:
        """One violation at `loc`; the message names the field so logs read on their own."""
        path = list(loc)
        where = ".".join(str(p) for p in path)
        return cls(f"{where}: {msg}" if where else msg,
                   detail=[{"loc": path, "msg": msg, "type": type}])


class Unauthenticated(TensorwireError):
    """Missing or invalid credentials."""

    http_status = 401
    grpc_code = "UNAUTHENTICATED"


class PermissionDenied(TensorwireError):
    """Not allowed."""

    http_status = 403
    grpc_code = "PERMISSION_DENIED"


class NotFound(TensorwireError):
    """No such API."""

    http_status = 404
    grpc_code = "NOT_FOUND"


class MethodNotAllowed(TensorwireError):
    """Method not allowed."""

    http_status = 405
    grpc_code = "UNIMPLEMENTED"


class UpgradeRequired(TensorwireError):
    """This route takes a WebSocket (an API whose input is a stream): open one."""

    http_status = 426
    grpc_code = "UNIMPLEMENTED"  # never raised over gRPC, where the rpc is the stream


class NotAcceptable(InvalidArgument):
    """The requested response media type cannot be produced."""

    http_status = 406
    grpc_code = "INVALID_ARGUMENT"


class PayloadTooLarge(TensorwireError):
    """The request is too large."""

    http_status = 413
    grpc_code = "RESOURCE_EXHAUSTED"


class UnsupportedMediaType(InvalidArgument):
    """Unsupported media type.

    An invalid input, as over gRPC (INVALID_ARGUMENT): `except InvalidArgument` catches
    it whichever protocol reported it.
    """

    http_status = 415
    grpc_code = "INVALID_ARGUMENT"


class Cancelled(TensorwireError):
    """The request was cancelled by the client."""

    http_status = 499
    grpc_code = "CANCELLED"


class InternalError(TensorwireError):
    """Internal server error."""

    http_status = 500
    grpc_code = "INTERNAL"
    public = False


class Unimplemented(TensorwireError):
    """Not implemented."""

    http_status = 501
    grpc_code = "UNIMPLEMENTED"


class Overloaded(TensorwireError):
    """Too many requests in flight; retry later."""

    http_status = 503
    grpc_code = "RESOURCE_EXHAUSTED"


class InsufficientStorage(TensorwireError):
    """No space left on device for the request's temporary files.

    The server's disk (or its quota) is full: not the client's fault, and nothing the
    request could change, so 507 (RFC 4918) rather than a bare 500; over gRPC the
    resource that ran out, RESOURCE_EXHAUSTED.
    """

    http_status = 507
    grpc_code = "RESOURCE_EXHAUSTED"


class ServiceUnavailable(TensorwireError):
    """The service is not ready or is shutting down."""

    http_status = 503
    grpc_code = "UNAVAILABLE"


class DeadlineExceeded(TensorwireError):
    """The request took longer than its deadline."""

    http_status = 504
    grpc_code = "DEADLINE_EXCEEDED"


class ClientError(TensorwireError):
    """Raised on the client side when no server answer came back."""


class ServerUnreachable(ClientError):
    """Could not connect to the server."""

    grpc_code = "UNAVAILABLE"
    http_status = 503


class ClientTimeout(ClientError):
    """The call did not complete before the client's timeout."""

    grpc_code = "DEADLINE_EXCEEDED"
    http_status = 504


#: Where a server names the error class it raised (HTTP header, gRPC trailing metadata,
#: SSE error event key), so a client rebuilds the very class where a status alone is
#: ambiguous (HTTP 503 is Overloaded or ServiceUnavailable; gRPC INVALID_ARGUMENT is
#: also UnsupportedMediaType/NotAcceptable).
ERROR_KIND_HEADER = "x-tensorwire-error"

# The first class listed for a status is the one a client rebuilds from it.
_SERVER_ERRORS: tuple[type[TensorwireError], ...] = (
    InvalidArgument, Unauthenticated, PermissionDenied, NotFound, MethodNotAllowed,
    NotAcceptable, PayloadTooLarge, UnsupportedMediaType, Cancelled, InternalError,
    Unimplemented, Overloaded, ServiceUnavailable, DeadlineExceeded, InsufficientStorage,
    UpgradeRequired,
)
_BY_HTTP: dict[int, type[TensorwireError]] = {}
_BY_GRPC: dict[str, type[TensorwireError]] = {}
for _cls in _SERVER_ERRORS:
    _BY_HTTP.setdefault(_cls.http_status, _cls)
    _BY_GRPC.setdefault(_cls.grpc_code, _cls)
_BY_GRPC["UNKNOWN"] = InternalError
_BY_NAME: dict[str, type[TensorwireError]] = {c.__name__: c for c in _SERVER_ERRORS}


#: errno values of a write that found the disk, or the user's quota, full.
_STORAGE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def as_error(exc: BaseException) -> TensorwireError:
    """What a server answers for `exc`, which handling a request raised: `exc` itself
    when it is in the error model, InsufficientStorage when it is a write that found
    the disk full (an upload spooled to the temp dir, a file the method wrote), else a
    private InternalError. Transports call this for every failure they did not expect,
    so that the one mapping lives here."""
    if isinstance(exc, TensorwireError):
        return exc
    if isinstance(exc, OSError) and exc.errno in _STORAGE_FULL:
        # strerror names the cause; the path (a server-side temp name) is not shown.
        why = (exc.strerror or "no space left on device").lower()
        return InsufficientStorage(
            f"insufficient storage on the server: {why} (writing the request's "
            f"temporary files)")
    return InternalError()


def error_kind(exc: TensorwireError) -> str:
    """The name of the built-in error class `exc` is (a user subclass names its base)."""
    for cls in type(exc).__mro__:
        if cls.__name__ in _BY_NAME and _BY_NAME[cls.__name__] is cls:
            return cls.__name__
    return InternalError.__name__


def _named(kind: str | None, fits: Any) -> type[TensorwireError] | None:
    cls = _BY_NAME.get(kind or "")
    return cls if cls is not None and fits(cls) else None


def error_from_http(
    status: int, message: str, detail: Sequence[FieldViolation] | None = None,
    kind: str | None = None,
) -> TensorwireError:
    """Rebuild the error a server reported with an HTTP status (and its error kind)."""
    cls = (_named(kind, lambda c: c.http_status == status) or _BY_HTTP.get(status)
           or (InvalidArgument if 400 <= status < 500 else InternalError))
    return cls(message, detail=detail, status=status)


def error_from_grpc(
    code_name: str, message: str, detail: Sequence[FieldViolation] | None = None,
    kind: str | None = None,
) -> TensorwireError:
    """Rebuild the error a server reported with a gRPC status code (by name) and kind."""
    cls = _named(kind, lambda c: c.grpc_code == code_name) or _BY_GRPC.get(
        code_name, InternalError)
    return cls(message, detail=detail)
