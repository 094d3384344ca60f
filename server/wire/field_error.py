"""A value that could not be decoded, and its one translation into the error model.

Shared by everything that reads values off a wire: the tensor byte checks and `.npy`
reader here, the codecs, and the clients (which report a bad argument with the same
class and location the server would).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InvalidArgument, UnsupportedMediaType

if TYPE_CHECKING:
    from pydantic import ValidationError


class FieldError(ValueError):
    """A value that could not be decoded, at a path that grows as nested readers unwind."""

    def __init__(self, msg: str, loc: tuple[str | int, ...] = (), type: str = "value_error"):
        super().__init__(msg)
        self.msg = msg
        self.loc = loc
        self.type = type

    def under(self, *prefix: str | int) -> FieldError:
        self.loc = (*prefix, *self.loc)
        return self


def invalid_argument(
    exc: ValidationError | FieldError, prefix: tuple[str | int, ...] = ()
) -> InvalidArgument:
    """The one translation of a validation failure into the error model."""
    if isinstance(exc, FieldError):
        loc = [*prefix, *exc.loc]
        # A media-type mismatch is the same error class on every protocol (415 over HTTP).
        cls = UnsupportedMediaType if exc.type == "content_type" else InvalidArgument
        return cls.at(loc, exc.msg, exc.type)
    detail = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = [*prefix, *err["loc"]]
        if loc[: len(prefix) + 1] == [*prefix, "__root__"]:
            loc = list(prefix)
        detail.append({"loc": loc, "msg": err["msg"], "type": err["type"]})
    first = detail[0] if detail else {"loc": [], "msg": str(exc)}
    where = ".".join(str(p) for p in first["loc"])
    summary = f"{where}: {first['msg']}" if where else first["msg"]
    if len(detail) > 1:
        summary += f" (and {len(detail) - 1} more)"
    return InvalidArgument(summary, detail=detail)
