"""estimate_tokens: the documented figures, and additivity (what pressure relies on)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from steerable_agent_runtime.compaction import estimate_text_tokens, estimate_tokens
from steerable_agent_runtime.models import LLMMessage, ToolCall


def test_ascii_text_is_a_quarter_token_per_character_plus_8_per_message():
    assert estimate_tokens([LLMMessage(role="user", content="a" * 400)]) == 100 + 8
    assert estimate_tokens([LLMMessage(role="user", content="a" * 400)] * 3) == 3 * 108


def test_cjk_characters_count_0_6_each():
    assert estimate_text_tokens("漢" * 100) == 60
    assert estimate_text_tokens("かな" * 50 + "a" * 100) == 60 + 25
    assert estimate_text_tokens("한국어" * 10) == 18


def test_each_image_part_counts_1024():
    parts = [{"type": "text", "text": "a" * 40}, {"type": "image_url", "image_url": {"url": "data:..."}},
             {"type": "image", "source": {"data": "..."}}]
    assert estimate_tokens([LLMMessage(role="user", content=parts)]) == 8 + 10 + 2048


def test_tool_call_name_and_arguments_are_counted():
    plain = LLMMessage(role="assistant", content=None)
    call = ToolCall(id="c", name="read_file", arguments={"path": "a" * 100})
    with_call = LLMMessage(role="assistant", content=None, tool_calls=[call.to_wire()])
    assert estimate_tokens([plain]) == 8
    assert estimate_tokens([with_call]) > 8 + 25


def test_wire_dicts_and_models_estimate_the_same():
    message = LLMMessage(role="assistant", content="hi there",
                         tool_calls=[ToolCall(id="c", name="t", arguments={"k": "v"}).to_wire()])
    assert estimate_tokens([message.to_wire()]) == estimate_tokens([message])


texts = st.text(alphabet=st.sampled_from("ab 漢字かな한\n{}"), max_size=60)


@given(st.lists(texts, max_size=8), st.lists(texts, max_size=8))
def test_estimate_is_additive_over_concatenation(first, second):
    a = [LLMMessage(role="user", content=t) for t in first]
    b = [LLMMessage(role="assistant", content=t) for t in second]
    assert estimate_tokens(a + b) == estimate_tokens(a) + estimate_tokens(b)


def test_tool_calls_in_openai_form_are_counted_like_the_neutral_form():
    # Assistant messages may hold OpenAI's {id, type, function: {name, arguments: "<json>"}}
    # (every provider reads it: llm/transcript.py); its name and arguments count the same.
    import json

    arguments = {"path": "a" * 400, "content": "x" * 4000}
    neutral = LLMMessage(role="assistant", tool_calls=[{"id": "c", "name": "write_file", "arguments": arguments}])
    openai = LLMMessage(role="assistant", tool_calls=[{"id": "c", "type": "function", "function": {
        "name": "write_file", "arguments": json.dumps(arguments, ensure_ascii=False)}}])
    assert estimate_tokens([openai]) == estimate_tokens([neutral]) > 1100
    assert estimate_tokens([openai.to_wire()]) == estimate_tokens([openai])
