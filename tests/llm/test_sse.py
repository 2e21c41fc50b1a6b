"""The SSE decoder against the WHATWG event-stream rules, fed whole and in every split."""

from __future__ import annotations

from hypothesis import given, settings
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


def reference(raw: bytes) -> list[SSEMessage]:
    """The WHATWG interpretation written plainly, line by line, for the differential test below."""
    text = raw.decode("utf-8", "replace").removeprefix("\ufeff")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:-1]  # the last piece has no line end
    out, data, event, last_id, retry = [], [], "", "", None
    for line in lines:
        if not line:
            if data:
                out.append(SSEMessage(event or "message", "\n".join(data), last_id, retry))
            data, event, retry = [], "", None
            continue
        name, colon, value = line.partition(":")
        if not name and colon:
            continue  # a comment
        value = value[1:] if value[:1] == " " else value
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    return out


ATOMS = [b'data: {"a":1}\n\n', b"data:x\n", b"data: y\n", b"\n", b"\r\n", b"\r", b"event: e\n", b"id: 7\n",
         b"id: a\x00b\n", b"retry: 12\n", b"retry: x\n", b": c\n", b"data\n", b"dat", b"a: z\n\n", b"\n\n\n",
         b"foo: bar\n", "data: é😀\n\n".encode(), b"data:  two\n\n", b"event:\n", b"data: [DONE]\n\n", b"\xe4\xb8",
         b"id: 8\n\n", b"retry: 5\ndata: r\n\n", b"event: e\ndata: d\n\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=30), st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_the_whole_event_fast_path_decodes_like_the_line_rules(atoms, cuts):
    """A feed holding whole events takes the per-event fast path; one byte at a time never
    does: both, any split, and a plain line-by-line reading of the spec agree."""
    raw = b"".join(atoms)
    points = sorted({c for c in cuts if c <= len(raw)})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)])]
    expected = reference(raw)
    assert decode(raw) == expected
    assert decode(*chunks) == expected
    assert decode(*[raw[i:i + 1] for i in range(len(raw))]) == expected


def decode_data(*chunks: bytes) -> tuple[list[str], str]:
    decoder = SSEDecoder()
    out: list[str] = []
    for chunk in chunks:
        out.extend(decoder.feed_data(chunk))
    return out, decoder.last_event_id


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=30), st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_feed_data_gives_the_data_of_the_same_events(atoms, cuts):
    """feed_data (what chat/completions reads) is feed without the message objects: the same
    events' data, in order, in any split, and the same last event id."""
    raw = b"".join(atoms)
    points = sorted({c for c in cuts if c <= len(raw)})
    chunks = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)])]
    expected = reference(raw)
    whole = SSEDecoder()
    whole.feed(raw)
    for pieces in ((raw,), chunks):
        data, seen_id = decode_data(*pieces)
        assert data == [m.data for m in expected]
        assert seen_id == whole.last_event_id


def test_lines_that_are_no_field_go_to_other_line_and_nothing_else_changes():
    class Keeping(SSEDecoder):
        __slots__ = ("seen",)

        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def other_line(self, line: str) -> None:
            self.seen.append(line)

    raw = b': comment\r\nretry: x\r\n{\r\n  "error": {"code": 1}\r\nfoo: bar\r\ndata: a\r\n\r\n}\r\ndata: b\r\n\r\n'
    for size in (1, 3, len(raw)):
        keeping = Keeping()
        msgs = [m for i in range(0, len(raw), size) for m in keeping.feed(raw[i:i + size])]
        assert msgs == decode(raw) == [SSEMessage(data="a"), SSEMessage(data="b")]
        assert keeping.seen == ["{", '  "error": {"code": 1}', "foo: bar", "}"]
