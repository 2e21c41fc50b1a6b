"""The summary step: the summarizer is asked with cache_retention="none"; the excerpt fallback."""

from __future__ import annotations

import logging

from steerable_agent_runtime.compaction import (
    SUMMARY_PREFIX,
    CompactionHooks,
    excerpt_summary,
)
from steerable_agent_runtime.llm import LLMError
from steerable_agent_runtime.llm.scripted import ScriptedProvider, ScriptedResponse

from tests.helpers import run

from .transcripts import agent_transcript, assistant, ctx, user


def _summary_of(rewrite):
    return next(m for m in rewrite.messages if isinstance(m.content, str) and m.content.startswith(SUMMARY_PREFIX))


def test_the_summarizer_is_called_once_with_cache_retention_none_and_its_text_is_kept():
    provider = ScriptedProvider(["The agent read files 0-7 of the parser; all tests pass."])
    hooks = CompactionHooks(100_000, summarizer=provider)
    rewrite = run(hooks.compact_now(agent_transcript(8), ctx()))
    assert len(provider.requests) == 1
    assert provider.requests[0].options == {"cache_retention": "none"}
    assert "file 0" in provider.requests[0].messages[-1].content  # it read the middle
    assert _summary_of(rewrite).content.endswith("The agent read files 0-7 of the parser; all tests pass.")


def test_a_failing_summarizer_falls_back_to_the_excerpt_summary(caplog):
    provider = ScriptedProvider([ScriptedResponse(error=LLMError("boom", kind="server", provider="x"))])
    hooks = CompactionHooks(100_000, summarizer=provider)
    with caplog.at_level(logging.WARNING):
        rewrite = run(hooks.compact_now(agent_transcript(8), ctx()))
    summary = _summary_of(rewrite).content
    assert "excerpts]" in summary.splitlines()[0]
    assert summary.splitlines()[1].startswith("[assistant] read_file(")
    assert "summarizer failed" in caplog.text


def test_an_empty_summary_falls_back_to_the_excerpt_summary():
    hooks = CompactionHooks(100_000, summarizer=ScriptedProvider(["   "]))
    summary = _summary_of(run(hooks.compact_now(agent_transcript(8), ctx()))).content
    assert "excerpts]" in summary.splitlines()[0]


def test_excerpt_is_one_line_per_message_role_and_first_200_characters():
    middle = [user("a" * 500), assistant("line one\nline two")]
    lines = excerpt_summary(middle).splitlines()
    assert lines[1:] == ["[user] " + "a" * 200, "[assistant] line one line two"]
    assert lines[0] == SUMMARY_PREFIX + "2 earlier messages, excerpts]"


def test_excerpt_left_out_lines_are_the_oldest_and_counted():
    middle = [user(f"message {n} " + "x" * 150) for n in range(50)]
    text = excerpt_summary(middle, max_chars=2000)
    assert len(text) < 2200
    assert "older messages left out" in text and text.splitlines()[-1].startswith("[user] message 49")


def test_excerpt_shows_a_call_in_openai_form_by_its_name_and_arguments():
    from steerable_agent_runtime.models import LLMMessage

    call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}
    line = excerpt_summary([LLMMessage(role="assistant", tool_calls=[call])]).splitlines()[1]
    assert line == '[assistant] read_file({"path": "a.py"})'
