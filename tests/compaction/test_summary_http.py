"""The summary call over real HTTP: CacheControlProvider(AnthropicProvider) sends it with no cache breakpoints."""

from __future__ import annotations

import json

from steerable_agent_runtime.compaction import SUMMARY_PREFIX, CompactionHooks
from steerable_agent_runtime.llm import AnthropicProvider, CacheControlProvider
from steerable_agent_runtime.llm.cache_control import count_breakpoints
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.replay_server import ReplayServer, Reply

from .transcripts import agent_transcript, ctx


def anthropic_stream(text: str) -> Reply:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
            "usage": {"input_tokens": 1200, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return Reply(chunks=[f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events])


def test_the_summary_request_carries_no_cache_breakpoint_while_a_normal_request_does():
    with ReplayServer([anthropic_stream("Read files 0-7; tests pass."), anthropic_stream("ok")]) as server:
        summarizer = CacheControlProvider(AnthropicProvider("claude-test", api_key="sk-test", base_url=server.url))
        rewrite = run(CompactionHooks(100_000, summarizer=summarizer).compact_now(agent_transcript(8), ctx()))
        run(summarizer.complete([LLMMessage(role="system", content="s"), LLMMessage(role="user", content="u")]))
        summary_body, normal_body = (r.body.decode() for r in server.requests)
    assert rewrite.messages[2].content == SUMMARY_PREFIX + "10 earlier messages]\nRead files 0-7; tests pass."
    assert "cache_control" not in summary_body and "# file 0" in summary_body
    assert "cache_control" in normal_body  # the same provider stamps breakpoints on an ordinary request


def test_compacted_requests_keep_a_stable_prefix_with_the_current_request_and_their_breakpoints():
    """Two compactions while the agent works on one long request, each compacted transcript then
    sent through CacheControlProvider(AnthropicProvider): the system prompt and the first user
    turn's leading blocks (the first user message, then the pinned current request, whole) are
    the same bytes in both bodies, so a prompt cache written on the first still serves the
    second up to the summary; and each body carries exactly its breakpoints: the last tool, the
    system prompt and the tail, none on the pinned request. No tools are offered, and the
    transcript calls read_file: the Anthropic adapter declares it unavailable (tool_choice
    none; the API refuses tool_use blocks in a request without tools), the same in both bodies."""
    from .test_current_request import REQUEST, chat_with_request
    from .transcripts import tool_round

    hooks = CompactionHooks(100_000)
    first = run(hooks.compact_now(chat_with_request(10), ctx())).messages
    second = run(hooks.compact_now(first + [m for n in range(10, 14) for m in tool_round(n)], ctx())).messages
    with ReplayServer([anthropic_stream("ok")]) as server:
        provider = CacheControlProvider(AnthropicProvider("claude-test", api_key="sk-test", base_url=server.url))
        for messages in (first, second):
            run(provider.complete(messages))
        bodies = [r.json() for r in server.requests]
    for body in bodies:
        assert count_breakpoints(body) == 3 and body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert [t["name"] for t in body["tools"]] == ["read_file"] and body["tool_choice"] == {"type": "none"}
        assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        lead = body["messages"][0]["content"]
        assert [b["text"] for b in lead[:2]] == ["Say hello.", REQUEST] and "cache_control" not in lead[1]
    assert bodies[0]["tools"] == bodies[1]["tools"] and bodies[0]["system"] == bodies[1]["system"]
    assert bodies[0]["messages"][0]["content"][:2] == bodies[1]["messages"][0]["content"][:2]
