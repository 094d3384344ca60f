"""What every dependency call shares, in-process or remote: its arguments and its kind.

A dependency is called like the service's method: `self.model.classify(x=arr)`,
`self.model.upload(path)` for a root input. `bind` maps such a call onto the API's
inputs by name exactly as the client does (positional arguments in declaration order,
a root input only positionally, None meaning "not given" so that the dependency's
default applies), so a call means the same thing whichever way it travels.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..contract.descriptor import APISpec


class Target(Protocol):
    """One API of a dependency, as a handle calls it (`LocalAPI`, `RemoteAPI`)."""

    #: `Model.classify`, for messages.
    where: str
    #: The callee's method is `async def` (BentoML's natural form: awaitable), or None
    #: while unknown (a dependency known only by URL, not connected yet).
    is_async: bool | None
    #: It streams its output (a generator), or None while unknown.
    stream: bool | None

    async def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The API's result."""

    def chunks(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        """A streaming API's chunks."""

    async def kind(self) -> bool:
        """Whether it streams, connecting first where that is not known yet."""


class Backend(Protocol):
    """A placed dependency: how its APIs are reached."""

    name: str

    def api(self, name: str) -> Target: ...

    def names(self) -> list[str]: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Inputs:
    """An API's inputs as a call binds them (from its `APISpec`)."""

    api: str
    fields: tuple[str, ...]
    root: bool
    #: The input that takes a stream of elements, if any.
    stream_in: str | None = None

    @classmethod
    def of(cls, api: APISpec) -> Inputs:
        stream_in = api.stream_input.name if api.stream_input is not None else None
        return cls(api.name, tuple(f.name for f in api.fields), api.is_root, stream_in)

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The call's values by input name; TypeError (at the call site) when the call
        cannot fit the API's inputs."""
        if self.root:
            name = self.fields[0]
            if kwargs:
                raise TypeError(f"{self.api}() takes its root input {name!r} as its only "
                                f"positional argument, not as {', '.join(kwargs)}=...")
            if len(args) > 1:
                raise TypeError(f"{self.api}() takes one root input ({name!r}), got "
                                f"{len(args)} positional arguments")
            return {name: args[0]} if args and args[0] is not None else {}
        if len(args) > len(self.fields):
            raise TypeError(f"{self.api}() takes at most {len(self.fields)} positional "
                            f"argument{'s' if len(self.fields) != 1 else ''} "
                            f"({', '.join(self.fields) or 'none'}), got {len(args)}")
        values = dict(zip(self.fields, args, strict=False))
        for name, value in kwargs.items():
            if name not in self.fields:
                raise TypeError(f"{self.api}() got an unexpected input {name!r}; it takes: "
                                f"{', '.join(self.fields) or 'no inputs'}")
            if name in values:
                raise TypeError(f"{self.api}() got input {name!r} twice")
            values[name] = value
        return {k: v for k, v in values.items() if v is not None}
