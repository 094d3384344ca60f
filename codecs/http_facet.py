"""The HTTP facet of a codec: raw bodies, multipart parts, responses and stream chunks.

The base facet is a JSON value: read as JSON text (validated from bytes by pydantic),
written as JSON. Families that travel otherwise (text, bytes, tensors as `.npy`, files,
images) subclass it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..wire.sse import sse_encoder
from .core import MISSING

if TYPE_CHECKING:
    from .core import Codec, Scope

JSON = "application/json"
#: curl -d sends form-urlencoded by default; a JSON API reads such a body as JSON text.
LENIENT_JSON = frozenset({"application/x-www-form-urlencoded", "text/json"})


def is_json_media(media_type: str | None) -> bool:
    if not media_type:
        return False
    return media_type == JSON or media_type.endswith("+json")


class Part(Protocol):
    """One multipart part (or a whole raw body) as the transport hands it over.

    Read at most once, by `read` or `save`.
    """

    name: str
    filename: str | None
    media_type: str | None
    #: Bytes read from the part so far (for the request's total-size budget).
    consumed: int
    #: Its bytes when known before reading (a plain body's Content-Length), else None.
    length: int | None
    #: The most it can hold within the request's limits and length; None when only
    #: `read` may be used (a chunked or compressed body: read whole, within limits).
    bound: int | None

    async def read(self) -> bytes:
        """Every byte not read yet (413 past the limits)."""
        ...

    async def read_exactly(self, n: int) -> bytes:
        """The next `n` bytes, fewer where the part ends first (only where `bound`)."""
        ...

    async def read_into(self, view: memoryview) -> int:
        """Fill `view` from the next bytes as they arrive, with no copy but into it;
        returns how many came (only where `bound` is not None)."""
        ...

    async def save(self, path: Any) -> int:
        """Stream the part into the file at `path`; returns its size."""
        ...


class UnsupportedBody(Exception):
    """A raw body of a media type the codec does not read (HTTP 415)."""

    def __init__(self, media_type: str | None, accepted: str) -> None:
        super().__init__(
            f"unsupported media type {media_type or '(none)'!s}; expected {accepted}"
        )
        self.media_type = media_type
        self.accepted = accepted


@dataclass(frozen=True)
class JsonText:
    """A raw body or part that is JSON text: validated straight from bytes by pydantic."""

    data: bytes


@dataclass
class HttpBody:
    """An encoded HTTP response body: bytes, or an async stream of chunks (files, SSE)."""

    #: Bytes, or pieces written one after another (views of an array's memory, say).
    content: bytes | AsyncIterator[bytes | memoryview]
    media_type: str
    headers: Mapping[str, str] = field(default_factory=dict)
    length: int | None = None


class HttpFacet:
    """How one codec's values travel over HTTP; this base is a JSON value.

    `is_file`, `repeated_parts`, `output_media` and `item` are properties because a
    list or a model answers them from what it holds, read when asked.

    What a subclass changes is declared in class flags (`json_answer`, `json_chunks`),
    read once when a handler or stream encoder is built: a subclass that overrides
    `encode` or `encode_chunk` sets the matching flag False (a unit test checks that
    every facet in `tensorwire.codecs` does).
    """

    #: Whether every response of this facet is the JSON of the value
    #: (`codec.dump_json(codec.output_value(value))`) whatever the request's Accept
    #: says, so a per-API handler may write those bytes with no `HttpBody` around them
    #: (`json_encoder`). False where `encode` writes anything else: text, raw bytes,
    #: `.npy`, files, multipart, or a wrapper that decides per value.
    json_answer: ClassVar[bool] = True
    #: Whether every streamed chunk is the JSON of the value (what the base
    #: `encode_chunk` writes), so a stream may call the codec's `json_dumper` per chunk.
    #: False where chunks are text, raw bytes or files.
    json_chunks: ClassVar[bool] = True

    def __init__(self, codec: Codec, *, body_media: str = JSON, output_media: str = JSON,
                 binary_media: tuple[str, ...] = (), is_file: bool = False) -> None:
        self.codec = codec
        #: Media type read as a raw (root input) body.
        self.body_media = body_media
        #: Binary media types read as a raw body and written when Accept asks for them,
        #: besides the JSON form (documentation, e.g. `application/x-npy` for tensors).
        self.binary_media = binary_media
        self._output_media = output_media
        self._is_file = is_file

    @property
    def output_media(self) -> str:
        """Media type of responses (documentation; `encode` decides)."""
        return self._output_media

    @property
    def is_file(self) -> bool:
        """Whether the value travels as a file (multipart part or raw body)."""
        return self._is_file

    @property
    def repeated_parts(self) -> bool:
        """Whether each multipart part of the field's name is one item (lists of files)."""
        return False

    @property
    def item(self) -> HttpFacet | None:
        """The facet of one item, where each item is its own part (lists of files)."""
        return None

    async def decode_body(self, body: Part, scope: Scope) -> Any:
        """A root input from the raw request body (a Part with the root field's name).

        Returns a Python value for pydantic, or `JsonText` to be validated from bytes.
        """
        media_type = body.media_type
        if media_type is None or is_json_media(media_type) or media_type in LENIENT_JSON:
            data = await body.read()
            return JsonText(data) if data.strip() else MISSING
        raise UnsupportedBody(media_type, self.body_media)

    async def decode_part(self, part: Part, scope: Scope) -> Any:
        """A value from one multipart part; non-file fields are JSON-encoded parts."""
        return JsonText(await part.read())

    def encode(self, value: Any, accept: str | None) -> HttpBody:
        """An HTTP response body for an output value."""
        codec = self.codec
        return HttpBody(codec.dump_json(codec.output_value(value)), JSON)

    def json_encoder(self) -> Callable[[Any], bytes] | None:
        """The JSON bytes of an output value, when every response of this facet is that
        JSON whatever the request's Accept says (None otherwise: tensors, files, models
        holding them). A compiled handler calls it instead of building an `HttpBody`."""
        if not self.json_answer:
            return None
        return self.plain_json_encoder()

    def plain_json_encoder(self) -> Callable[[Any], bytes]:
        """What `encode` does for a JSON value, without the `HttpBody` around it."""
        return self.codec.json_dumper()

    def encode_chunk(self, value: Any) -> bytes:
        """One streamed chunk (SSE `data:`); JSON unless the family knows better."""
        codec = self.codec
        return codec.dump_json(codec.output_value(value))

    def sse_chunk_encoder(self) -> Callable[[Any], bytes]:
        """One streamed chunk as its server-sent event, `sse_event(encode_chunk(v))`,
        in one function (`wire.sse.sse_encoder`)."""
        return sse_encoder(self.chunk_encoder())

    def chunk_encoder(self) -> Callable[[Any], bytes]:
        """`encode_chunk` as one function with this facet's facts bound: what a stream
        calls per chunk (a chunk is most of what a streamed token costs the server)."""
        if self.json_chunks:
            return self.codec.json_dumper()
        return self.encode_chunk
