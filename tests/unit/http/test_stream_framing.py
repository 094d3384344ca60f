"""Stream framing: server-sent events, or BentoML's one-item-per-chunk for its client."""

from __future__ import annotations

import pytest

from tensorwire.http.stream_framing import SSE, framing_for


def test_events_by_default_and_for_clients_that_ask_for_them():
    assert framing_for({}, "text/plain") is SSE
    assert framing_for({"User-Agent": "curl/8.5.0", "Accept": "*/*"}, "text/plain") is SSE
    bento_asking = {"User-Agent": "BentoML HTTP Client/1.4.40", "Accept": "text/event-stream"}
    assert framing_for(bento_asking, "text/plain") is SSE
    assert SSE.item(b"hi") == b"data: hi\n\n"
    assert SSE.error is not None and SSE.error(b"{}").startswith(b"event: error\n")


def test_bentomls_client_gets_each_item_as_it_is():
    framing = framing_for({"User-Agent": "BentoML HTTP Client/1.4.40"}, "text/plain")
    assert framing.item(b"hi ") == b"hi "
    assert framing.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert framing.error is None  # BentoML's framing has no error frame: the stream ends
    as_json = framing_for({"User-Agent": "BentoML HTTP Client/1.4.40"}, "application/json")
    assert as_json.headers["Content-Type"] == "application/json"


def _codec_http(annotation: object):
    """The HTTP facet a stream of `annotation` items encodes each item with."""
    from tensorwire.codecs import codec_for

    return codec_for(annotation).http


def test_the_fused_chunk_writer_writes_what_framing_and_encoder_write():
    """The SSE encoder and `chunk_writer` are `framing.item(encode(chunk))` in one call,
    for every chunk."""
    import typing as t

    import pydantic

    from tensorwire.http.stream_framing import chunk_writer

    class Token(pydantic.BaseModel):
        text: str

    cases: list[tuple[object, list[object]]] = [
        (str, ["tok ", "", "two\nlines", "cr\rhere", "crlf\r\nend", "héllo"]),
        (t.Literal["a", "b"], ["a", "b"]),
        (int, [0, 7, -3]),
        (dict[str, float], [{"x": 1.5}, {}]),
        (Token, [Token(text="a\nb"), Token(text="plain")]),
    ]
    bento = framing_for({"User-Agent": "BentoML HTTP Client/1.4.40"}, "text/plain")
    for annotation, chunks in cases:
        http = _codec_http(annotation)
        encode = http.chunk_encoder()
        writers = [(SSE, http.sse_chunk_encoder()), (bento, chunk_writer(bento, encode))]
        for framing, write in writers:
            for chunk in chunks:
                assert write(chunk) == framing.item(encode(chunk)), (annotation, chunk)


def test_a_str_token_is_framed_inline_only_where_the_codec_passes_str_as_is():
    """A plain `str` stream's token is encoded and framed in one call; a Literal's is
    validated first (its codec's encoder), as before."""
    import typing as t

    assert _codec_http(str).sse_chunk_encoder().__name__ == "frame_text"
    assert _codec_http(t.Literal["a", "b"]).sse_chunk_encoder().__name__ == "frame"
    assert _codec_http(int).sse_chunk_encoder().__name__ == "frame"
    with pytest.raises(Exception):  # noqa: B017 - whatever the codec's check raises
        _codec_http(t.Literal["a", "b"]).sse_chunk_encoder()("c")
