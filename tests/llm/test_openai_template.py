"""The chat/completions hot path (llm/openai_compat_template.py): a chunk read through a learned
template gives exactly the content a full parse gives, or None (then the full parse decides);
never another value. And a whole stream reads the same chunks with it as without it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from steerable_agent_runtime.llm.openai_compat import _ChatStream, json_loader
from steerable_agent_runtime.llm.openai_compat_template import PROBE, ChunkTemplate, learn, plain_content

from tests.llm.openai_cases import provider_read
from tests.replay_server import Reply

loads = json_loader()


def openai(text):
    return json.dumps({"id": "chatcmpl-9", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-4o",
                       "system_fingerprint": "fp_1", "choices": [{"index": 0, "delta": {"content": text},
                                                                 "logprobs": None, "finish_reason": None}]})


def compact(text):  # vLLM / llama.cpp style: no spaces, content not last in its object
    return json.dumps({"id": "x", "choices": [{"delta": {"content": text, "role": None}, "index": 0}]},
                      separators=(",", ":"), ensure_ascii=False)


def ollama(text):
    return json.dumps({"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": "llama3",
                       "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]})


def groq(text):
    return json.dumps({"id": "g", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
                       "x_groq": {"id": "req_1"}})


def decoy(text):  # another "content" key after the slot (with the learned chunk's value)
    return json.dumps({"choices": [{"delta": {"content": text}}], "meta": {"content": "first"}})


def spaced(text):
    return '{ "choices" : [ { "delta" : { "content" :  ' + json.dumps(text) + ' } } ] }'


FRAMES = [openai, compact, ollama, groq, decoy, spaced]
TEXT = st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(['"', "\\", "\n", "\x00", "\u2028", "}", "{"]))


def template_of(frame):
    data = frame("first")
    template = learn(data, loads(data), loads)
    assert template is not None, data
    return template


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.__name__)
@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_a_chunk_in_the_learned_frame_reads_its_exact_text(frame, text):
    template = template_of(frame)
    data = frame(text)
    assert template.text(data) == plain_content(json.loads(data)) == text


def _expected(template_data, content):
    obj = json.loads(template_data)
    obj["choices"][0]["delta"]["content"] = content
    return obj


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.__name__)
@settings(max_examples=300, deadline=None)
@given(middle=st.text(alphabet=st.sampled_from(list('ab"\\/u0123{}[],: \n\tnull') + ["\x01", "é"]), max_size=24))
def test_any_text_between_head_and_tail_is_read_right_or_refused(frame, middle):
    """Whatever sits between the head and the tail (an early quote, a bad escape, a second
    string, a raw control character), the template gives the full parse's value or None."""
    template = template_of(frame)
    data = template.head + middle + template.tail
    got = template.text(data)
    if got is None:
        return
    full = json.loads(data)  # it must parse, and to the learned object with this content
    assert full == _expected(frame("first"), got)


def test_the_opening_and_closing_quotes_belong_to_the_frame():
    template = template_of(compact)
    assert template.head.endswith('"content":"') and template.tail.startswith('","role":null}')
    assert template.text(compact("x")[:-1]) is None  # the tail cut short
    assert template.text(template.head + 'a","x":"b' + template.tail) is None  # two strings, not one
    assert template.text(template.head + 'a\\"b' + template.tail) == 'a"b'


@pytest.mark.parametrize("obj", [
    {"choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}]},
    {"choices": [{"delta": {"content": "a"}}], "usage": {"prompt_tokens": 1}},
    {"choices": [{"delta": {"content": "a"}}], "x_groq": {"usage": {"prompt_tokens": 1}}},
    {"choices": [{"delta": {"content": "a", "reasoning_content": "r"}}]},
    {"choices": [{"delta": {"content": "a", "reasoning": "r"}}]},
    {"choices": [{"delta": {"content": "a", "tool_calls": [{"index": 0}]}}]},
    {"choices": [{"delta": {"content": "a"}}, {"delta": {"content": "b"}}]},
    {"choices": [{"delta": {"content": None}}]},
    {"choices": [], "error": {"message": "x"}},
    ["content"],
], ids=str)
def test_no_template_from_a_chunk_that_carries_more_than_text(obj):
    data = json.dumps(obj)
    assert learn(data, json.loads(data), loads) is None


def test_no_template_where_a_later_duplicate_key_overrides_the_slot():
    data = '{"choices":[{"delta":{"content":"a"}}],"choices":[{"delta":{"content":"a"}}]}'
    template = learn(data, loads(data), loads)  # the last "choices" wins: its content is the slot
    assert template is not None and template.head.count('"content"') == 2
    data = '{"choices":[{"delta":{"content":"a","content":"b"}}]}'
    template = learn(data, loads(data), loads)
    assert template is not None and template.text(data) == "b" and template.head.count('"content"') == 2
    data = '{"choices":[{"delta":{"content":"a"}}],"x":{"content":"a"}}'
    assert learn(data, loads(data), loads).tail.endswith('"x":{"content":"a"}}')


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: f.__name__)
@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.tuples(st.booleans(), TEXT), max_size=12), at=st.integers(min_value=0, max_value=3))
def test_read_takes_the_run_of_fitting_chunks_and_stops_at_the_first_other(frame, items, at):
    """read(batch, at, emit) is text() over batch[at:] up to the first chunk text() refuses."""
    template = template_of(frame)
    batch = [frame(text) if fits else json.dumps({"other": text}) for fits, text in items]
    got: list[str] = []
    end = template.read(batch, at, got.append)
    expected_end = at
    while expected_end < len(batch) and template.text(batch[expected_end]) is not None:
        expected_end += 1
    assert end == expected_end
    assert got == [t for t in (template.text(d) for d in batch[at:end]) if t]


def test_the_probe_is_a_plain_string():
    assert json.dumps(PROBE) == f'"{PROBE}"'


def test_the_stream_state_learns_a_few_times_then_only_while_it_pays():
    state = _ChatStream("openai_compat", "http://x")
    for index in range(10):  # every chunk another frame: tried three times, then no more
        state.feed(json.dumps({"choices": [{"delta": {"content": "t"}}], "obfuscation": "x" * index}))
    assert state.learned == 3


STREAMS = {
    "plain": [ollama(""), *[openai(f"w{i} ") for i in range(50)]],
    "frame changes": [*[openai(f"a{i}") for i in range(40)], *[ollama(f"b{i}") for i in range(40)],
                      *[openai(f"c{i}") for i in range(40)]],
    "odd texts": [openai(t) for t in ["x", 'q"uote', "back\\slash", "\x00", "é", "\ud83d", "", "\n\n", "data: [DONE]"]],
    "every chunk differs": [json.dumps({"choices": [{"delta": {"content": f"t{i}"}}], "n": i}) for i in range(60)],
}


#: chunks each stream reads through a template, at least (the rest take the full parse)
FAST = {"plain": 48, "frame changes": 110, "odd texts": 5, "every chunk differs": 0}


@pytest.mark.parametrize("with_sink", [False, True], ids=["yielded", "text_sink"])
@pytest.mark.parametrize("name", STREAMS)
def test_a_stream_reads_the_same_chunks_as_a_plain_json_loads_reading(name, with_sink, monkeypatch):
    """Yielded, or (option text_sink) the template-read texts handed to the sink in their
    place among the yielded chunks: the same texts in the same order either way."""
    events = STREAMS[name]
    tail = [json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
            json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})]
    body = [f"data: {e}\n\n".encode() for e in [*events, *tail]] + [b"data: [DONE]\n\n"]
    expected = [c for c in (json.loads(e)["choices"][0]["delta"].get("content") for e in events) if c]

    texts: list[str] = []  # every text in arrival order, from the sink or from a yielded chunk
    options = {"text_sink": texts.append} if with_sink else {}

    fast: list[str] = []  # the texts read through a template (empty ones included)
    hits = [0]
    read_run = ChunkTemplate.read

    def counted(self, batch, at, emit):
        end = read_run(self, batch, at, emit)
        hits[0] += end - at
        fast.extend(self.text(data) for data in batch[at:end])
        return end

    monkeypatch.setattr(ChunkTemplate, "read", counted)  # the real method, counted
    chunks = provider_read(Reply(chunks=[b"".join(body)]), options, texts)
    assert hits[0] >= FAST[name], (hits, len(fast))
    assert texts == expected
    yielded = [c.content_delta for c in chunks if c.content_delta]
    assert len(yielded) == (len(expected) - sum(bool(value) for value in fast) if with_sink else len(expected))
    assert chunks[-1].finish_reason == "stop" and chunks[-1].usage.total_tokens == 5
