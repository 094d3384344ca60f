"""The incremental server-sent-events parser."""

from __future__ import annotations

from tensorwire.wire.sse import Event, SSEDecoder, sse_event


def feed_all(chunks):
    decoder = SSEDecoder()
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events + decoder.close()


def test_events_split_anywhere_come_out_whole():
    wire = b"".join([sse_event(b"one"), sse_event(b"two\nlines"),
                     sse_event(b'{"error": "x"}', event="error")])
    want = [Event("one"), Event("two\nlines"), Event('{"error": "x"}', "error")]
    for size in (1, 2, 3, 7, len(wire)):
        chunks = [wire[i:i + size] for i in range(0, len(wire), size)]
        assert feed_all(chunks) == want


def test_line_endings_comments_and_fields():
    wire = b": a comment\r\nevent: tick\r\ndata:no space\r\ndata:  two spaces\r\n\r\n"
    assert feed_all([wire]) == [Event("no space\n two spaces", "tick")]
    assert feed_all([b"data: a\r", b"\ndata: b\r\r"]) == [Event("a\nb")]
    assert feed_all([b"data: unterminated"]) == [Event("unterminated")]
    assert feed_all([b"\n\n", b"retry: 10\n\n"]) == []


def test_empty_and_unicode_data():
    assert feed_all([sse_event(b"")]) == [Event("")]
    text = "héllo ✓".encode()
    assert feed_all([text[:3] and sse_event(text)[:8], sse_event(text)[8:]]) == [
        Event("héllo ✓")]


def test_a_chunk_with_a_line_break_anywhere_is_split_into_data_lines():
    # the one-line fast path looks for the byte values of LF and CR: a break at the
    # start, the end or alone must still take the multi-line framing
    for data, lines in [(b"a\nb", [b"a", b"b"]), (b"\ra", [b"", b"a"]),
                        (b"a\r\n", [b"a", b""]), (b"\n", [b"", b""])]:
        assert sse_event(data) == b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    assert sse_event(b"plain, 10 and 13") == b"data: plain, 10 and 13\n\n"
