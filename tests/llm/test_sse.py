"""The SSE decoder against the WHATWG event-stream rules, fed whole and in every split."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.llm.sse import SSEDecoder, SSEMessage


def decode(*chunks: bytes) -> list[SSEMessage]:
    decoder = SSEDecoder()
    out: list[SSEMessage] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    return out


def test_multiline_data_joins_with_newline_and_event_type_defaults_to_message():
    [msg] = decode(b"data: one\ndata: two\ndata\n\n")
    assert msg == SSEMessage(event="message", data="one\ntwo\n", id="", retry=None)


def test_event_id_retry_and_comments():
    msgs = decode(b": keep-alive\nevent: delta\nid: 7\nretry: 1500\ndata: {}\n\ndata: x\n\n")
    assert [(m.event, m.data, m.id, m.retry) for m in msgs] == [("delta", "{}", "7", 1500), ("message", "x", "7", None)]


def test_id_with_nul_and_retry_with_non_digits_are_ignored():
    msgs = decode(b"id: a\ndata: 1\n\nid: b\x00c\nretry: 12a\ndata: 2\n\n")
    assert [(m.id, m.retry) for m in msgs] == [("a", None), ("a", None)]


def test_crlf_cr_and_lf_line_endings_decode_alike():
    lf = decode(b"event: e\ndata: a\ndata: b\n\n")
    assert decode(b"event: e\r\ndata: a\r\ndata: b\r\n\r\n") == lf
    assert decode(b"event: e\rdata: a\rdata: b\r\r") == lf


def test_crlf_split_across_feeds_is_one_line_end():
    assert decode(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [SSEMessage(data="a"), SSEMessage(data="b")]


def test_only_one_space_after_colon_is_dropped_and_a_field_without_colon_has_empty_value():
    [msg] = decode(b"data:  two spaces\ndata:none\n\n")
    assert msg.data == " two spaces\nnone"


def test_event_without_data_is_not_dispatched_and_resets_the_type():
    assert decode(b"event: ping\n\ndata: x\n\n") == [SSEMessage(event="message", data="x")]


def test_final_event_without_blank_line_is_not_dispatched():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == [SSEMessage(data="a")]
    assert decoder.close() is True
    clean = SSEDecoder()
    clean.feed(b"data: a\n\n")
    assert clean.close() is False


def test_leading_bom_is_dropped_once_and_unknown_fields_ignored():
    [msg] = decode(b"\xef\xbb\xbfdata: a\nfoo: bar\n\n")
    assert msg.data == "a"
    [msg2] = decode(b"data: \xef\xbb\xbfa\n\n")
    assert msg2.data == "\ufeffa"


def test_utf8_sequence_split_across_feeds():
    raw = "data: héllo → 世界\n\n".encode()
    assert decode(*[raw[i:i + 1] for i in range(len(raw))]) == [SSEMessage(data="héllo → 世界")]


STREAM = ("\ufeffevent: a\r\ndata: 1\r\n\r\n: c\rdata: é\rdata\r\rid: 9\nretry: 3\ndata: 世\n\n"
          "event: lost\ndata: tail").encode()


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_decodes_like_the_whole(cuts):
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)])]
    assert decode(*chunks) == decode(STREAM) == [
        SSEMessage(event="a", data="1"), SSEMessage(data="é\n"), SSEMessage(data="世", id="9", retry=3)]
