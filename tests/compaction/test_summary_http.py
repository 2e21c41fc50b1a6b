"""The summary call over real HTTP: CacheControlProvider(AnthropicProvider) sends it with no cache breakpoints."""

from __future__ import annotations

import json

from steerable_agent_runtime.compaction import SUMMARY_PREFIX, CompactionHooks
from steerable_agent_runtime.llm import AnthropicProvider, CacheControlProvider
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
