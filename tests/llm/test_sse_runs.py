"""SSEDecoder.text_runs (the chat/completions hot path): runs of events in a learned frame come
as one list of their decoded strings. Held to the plain decoder and the template's own reading
(itself held to json.loads in test_openai_template.py): the same events, in the same order,
with the same values, in any split of the bytes; only the grouping differs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from steerable_agent_runtime.llm.openai_compat import json_loader
from steerable_agent_runtime.llm.openai_compat_template import learn
from steerable_agent_runtime.llm.sse import SSEDecoder

from tests.llm.test_sse import ATOMS, reference

loads = json_loader()


def spaced(body: str) -> str:  # the OpenAI SDK's test servers and the replay tests: json.dumps spacing
    return ('{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m", '
            '"choices": [{"index": 0, "delta": {"content": "' + body + '"}, "finish_reason": null}]}')


def compact(body: str) -> str:  # vLLM / llama.cpp: no spaces, the content not last
    return '{"id":"x","choices":[{"delta":{"content":"' + body + '","role":null},"index":0}]}'


FRAMES = [spaced, compact]

#: raw string bodies: plain text, escapes good and bad, quotes, control characters, a line break
BODY = st.one_of(
    st.text(alphabet=st.sampled_from(list("ab c9{}[]:,") + ["é", "世", "😀", "\x7f"]), max_size=8),
    st.text(max_size=6).map(lambda t: json.dumps(t)[1:-1]),  # any string, encoded as a server would
    st.lists(st.sampled_from(["a", '"', "\\", "\\n", '\\"', "\\u00e9", "\\ud800", "\\x", "\x01", "\n", "\t",
                              "\\u12", "\\/"]), max_size=6).map("".join),
)


def template_of(frame):
    data = frame("first")
    template = learn(data, loads(data), loads)
    assert template is not None
    return template


def normal(items: list, template) -> list[tuple[str, str]]:
    """Each event as ("text", value) when the template reads it, else ("data", its data);
    a run list stands for its texts."""
    out = []
    for item in items:
        if type(item) is list:
            out.extend(("text", text) for text in item)
        else:
            value = template.text(item)
            out.append(("data", item) if value is None else ("text", value))
    return out


def decode(chunks: list[bytes], template=None) -> tuple[list, str, bool]:
    decoder = SSEDecoder()
    if template is not None:
        decoder.text_runs(template.head, template.tail)
    items: list = []
    for chunk in chunks:
        items.extend(decoder.feed_data(chunk))
    last_id = decoder.last_event_id
    return items, last_id, decoder.close()


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c for c in cuts if c <= len(raw)})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)])]


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.__name__)
@settings(max_examples=400, deadline=None)
@given(parts=st.lists(st.one_of(BODY.map(lambda b: ("frame", b)), st.sampled_from(ATOMS).map(lambda a: ("atom", a))),
                      max_size=40),
       cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=5))
def test_runs_read_the_same_events_as_the_plain_decoder(frame, parts, cuts):
    template = template_of(frame)
    raw = b"".join(f"data: {frame(p)}\n\n".encode() if kind == "frame" else p for kind, p in parts)
    plain_items, plain_id, plain_left = decode([raw])
    assert [m.data for m in reference(raw)] == plain_items  # the plain decoder: the spec's events
    expected = normal(plain_items, template)
    for chunks in ([raw], split(raw, cuts)):
        items, last_id, left = decode(chunks, template)
        assert normal(items, template) == expected
        assert (last_id, left) == (plain_id, plain_left)
        assert all(item for item in items if type(item) is list)  # never an empty run


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.__name__)
def test_a_stream_in_one_frame_comes_as_runs(frame):
    """What the relay reads: after the first event, one list per network read."""
    template = template_of(frame)
    texts = [f"w{i} " for i in range(300)] + ["line\nbreak", 'a "quote"', "é", ""]
    raw = b"".join(f"data: {frame(json.dumps(t)[1:-1])}\n\n".encode() for t in texts) + b"data: [DONE]\n\n"
    items, _, left = decode(split(raw, [len(raw) // 3, 2 * len(raw) // 3]), template)
    assert not left
    assert normal(items, template) == [*[("text", t) for t in texts], ("data", "[DONE]")]
    runs = [item for item in items if type(item) is list]
    assert len(runs) <= 4 and sum(map(len, runs)) >= len(texts) - 3  # a few events at the read edges read singly


def test_a_frame_with_a_line_break_or_no_frame_turns_runs_off():
    decoder = SSEDecoder()
    decoder.text_runs('{"a":\n"', '"}')
    assert decoder.feed_data(b'data: {"a":\n"x"}\n\n') == ['{"a":']
    decoder.text_runs('{"a":"', '"}')
    # the last event before the read's end is read singly (nothing after it to cut at yet)
    assert decoder.feed_data(b'data: {"a":"x"}\n\ndata: {"a":"y"}\n\n') == [["x"], '{"a":"y"}']
    decoder.text_runs(None)
    assert decoder.feed_data(b'data: {"a":"x"}\n\ndata: {"a":"y"}\n\n') == ['{"a":"x"}', '{"a":"y"}']
