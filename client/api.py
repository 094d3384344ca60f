"""One remote API as a client sees it: its inputs, how to bind a call, what it returns.

Built once on connect from the server's contract (HTTP `/schema.json`, gRPC reflection)
and shared read-only by every call, so a client is safe to use from many tasks/threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from .filedata import is_pil_type, open_image


@dataclass(frozen=True)
class APIInfo:
    """What `client.list_apis()` tells about an API."""

    name: str
    doc: str | None
    #: input name -> short type summary, in declaration order
    inputs: dict[str, str]
    output: str
    stream: bool
    #: True: the API takes one positional root input; False: keyword inputs; None: the
    #: contract cannot tell (a single-field gRPC request from a server whose contract
    #: has no `tensorwire.v1.root_input` method option, such as an older tensorwire).
    root_input: bool | None
    #: The inputs a call must give (no default): from `/schema.json` over HTTP, from the
    #: `(tensorwire.v1.required)` field option over gRPC (a server older than that option
    #: marks none).
    required: tuple[str, ...] = ()
    #: The HTTP route or the gRPC method path.
    address: str = ""
    #: The API takes a stream (its one input is an `AsyncIterator[T]`): pass an iterable
    #: or async iterable of elements; gRPC client-streaming (bidirectional when `stream`
    #: too), a WebSocket over HTTP.
    stream_in: bool = False


@dataclass
class RemoteField:
    name: str
    kind: Any
    summary: str


@dataclass
class RemoteAPI:
    """The protocol-neutral part of an API; transports keep their own bits in `wire`."""

    name: str
    doc: str | None
    fields: list[RemoteField]
    root: bool | None
    stream: bool
    output: Any
    output_summary: str
    address: str
    required: tuple[str, ...] = ()
    wire: dict[str, Any] = field(default_factory=dict)
    #: Its one input is a stream of elements (see `APIInfo.stream_in`).
    stream_in: bool = False

    def __post_init__(self) -> None:
        self.field_names = [f.name for f in self.fields]
        self.by_name = {f.name: f for f in self.fields}

    def info(self) -> APIInfo:
        return APIInfo(self.name, self.doc, {f.name: f.summary for f in self.fields},
                       self.output_summary, self.stream, self.root, self.required,
                       self.address, self.stream_in)

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The values of one call by input name; TypeError for a call that cannot fit.

        None means "not given": the input is left out, so the server applies its
        default (or reports a missing required input), identically on both protocols.
        A streamed input must be given, as an iterable (not a str, bytes or mapping).
        """
        values = self._bind_root(args, kwargs) if self.root else self._bind(args, kwargs)
        if self.stream_in:
            name = self.fields[0].name if self.fields else "input"
            given = values.get(name)
            if given is None or isinstance(given, str | bytes | bytearray | Mapping) or not (
                    hasattr(given, "__iter__") or hasattr(given, "__aiter__")):
                raise TypeError(f"{self.name}() takes a stream as {name!r}: pass an iterable "
                                "or async iterable of its elements (a generator, a list...), "
                                f"got {type(given).__name__}")
        return values

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if len(args) > len(self.fields):
            raise TypeError(f"{self.name}() takes at most {len(self.fields)} positional "
                            f"argument{'s' if len(self.fields) != 1 else ''} "
                            f"({', '.join(self.field_names) or 'none'}), got {len(args)}")
        for f, value in zip(self.fields, args, strict=False):
            values[f.name] = value
        for name, value in kwargs.items():
            if name not in self.by_name:
                raise TypeError(f"{self.name}() got an unexpected input {name!r}; it takes: "
                                f"{', '.join(self.field_names) or 'no inputs'}")
            if name in values:
                raise TypeError(f"{self.name}() got input {name!r} twice")
            values[name] = value
        return {k: v for k, v in values.items() if v is not None}

    def _bind_root(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        name = self.fields[0].name
        if kwargs:
            given = ", ".join(f"{k}=..." for k in kwargs)
            raise TypeError(
                f"{self.name}() takes its root input {name!r} as its only positional "
                f"argument: call {self.name}(value), not {self.name}({given}) "
                "(a root input is positional-only: the request body is the value)")
        if len(args) > 1:
            raise TypeError(f"{self.name}() takes one root input ({name!r}), got "
                            f"{len(args)} positional arguments")
        if not args or args[0] is None:
            return {}
        return {name: args[0]}


def adapt_output(value: Any, target: Any) -> Any:
    """The decoded output as the type the caller asked for (`output_types=`).

    Models are validated from their dict; `PIL.Image.Image` opens a file output;
    `numpy.ndarray` wraps lists; any other type goes through pydantic.
    """
    if target is None or value is None:
        return value
    if is_pil_type(target):
        if isinstance(value, bytes):
            return open_image(value)
        if isinstance(value, Path):
            return open_image(value.read_bytes())
        return value
    module = getattr(target, "__module__", "")
    if module == "numpy" and getattr(target, "__name__", "") == "ndarray":
        import numpy as np

        return np.asarray(value)
    return TypeAdapter(target).validate_python(value)


def validate_output_types(output_types: Any) -> dict[str, Any]:
    if output_types is None:
        return {}
    if not isinstance(output_types, dict) or not all(isinstance(k, str) for k in output_types):
        raise TypeError("output_types maps API names to the Python type of their output")
    return dict(output_types)
