"""A real provider over real HTTP: Anthropic's "prompt is too long" 400 is recognised, compacted and retried."""

from __future__ import annotations

import asyncio
import json

from steerable_agent_runtime import SqliteStorage
from steerable_agent_runtime.compaction import SUMMARY_PREFIX, CompactionHooks
import pytest
from steerable_agent_runtime.llm import AnthropicProvider, OpenAICompatProvider
from steerable_agent_runtime.loop import ChainHooks, CoreLoop, RetryHooks

from tests.replay_server import ReplayServer, Reply
from tests.sidecar.openai_sse import text_reply

from .test_summary_http import anthropic_stream

OVERFLOW_BODY = {"type": "error", "error": {"type": "invalid_request_error",
                                           "message": "prompt is too long: 210311 tokens > 200000 maximum"}}


def long_chat() -> list[dict]:
    chat = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Plan the migration."}]
    for k in range(12):
        chat.append({"role": "assistant" if k % 2 == 0 else "user", "content": f"turn {k} " + "w" * 3000})
    return chat + [{"role": "user", "content": "and the rollback?"}]


async def converse(server_url: str, store, provider=None) -> tuple[list, CompactionHooks]:
    compaction = CompactionHooks(1_000_000)
    provider = provider or AnthropicProvider("claude-test", api_key="sk-test", base_url=server_url)
    loop = CoreLoop(provider, hooks=ChainHooks(RetryHooks(), compaction), storage=store)
    return [event async for event in loop.run(long_chat(), chat_id="c1")], compaction


def test_an_http_400_context_overflow_is_compacted_and_retried(tmp_path):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        with ReplayServer([Reply.json(400, OVERFLOW_BODY), anthropic_stream("Roll back with the snapshot.")]) as server:
            events, compaction = asyncio.run(converse(server.url, store))
            bodies = [json.loads(r.body) for r in server.requests]
        assert events[-1].data["status"] == "completed", events[-1].data
        assert compaction.overflow_recoveries == 1 and len(bodies) == 2
        retried = bodies[1]["messages"]
        assert len(retried) < len(bodies[0]["messages"]) and SUMMARY_PREFIX in json.dumps(retried)
        entries = asyncio.run(store.list_history("c1"))
        assert [e["trigger"] for e in entries if e["type"] == "compaction_boundary"] == ["overflow"]
    finally:
        asyncio.run(store.close())


# What the servers really answer when the prompt does not fit, each seen in the wild: Anthropic when
# the input plus max_tokens passes the window (the commonest overflow near the limit: the prompt
# itself still fits), and llama.cpp's server (llama-server, the local model behind an
# OpenAI-compatible URL).
ANTHROPIC_WITH_MAX_TOKENS = {"type": "error", "error": {
    "type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: "
    "197000 + 8192 > 200000, decrease input length or `max_tokens` and try again"}}
LLAMA_CPP = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                       "type": "exceed_context_size_error", "n_prompt_tokens": 14429, "n_ctx": 8192}}


@pytest.mark.parametrize("body,reply,make", [
    (ANTHROPIC_WITH_MAX_TOKENS, anthropic_stream("Roll back with the snapshot."),
     lambda url: AnthropicProvider("claude-test", api_key="sk-test", base_url=url)),
    (LLAMA_CPP, text_reply(["Roll back with the snapshot."]),
     lambda url: OpenAICompatProvider("qwen", base_url=url + "/v1")),
], ids=["anthropic-input-plus-max-tokens", "llama-cpp-server"])
def test_real_overflow_bodies_of_other_servers_are_compacted_and_retried(tmp_path, body, reply, make):
    store = SqliteStorage(tmp_path / "sessions.db")
    try:
        with ReplayServer([Reply.json(400, body), reply]) as server:
            events, compaction = asyncio.run(converse(server.url, store, make(server.url)))
            sent = len(server.requests)
        assert events[-1].data["status"] == "completed", events[-1].data
        assert compaction.overflow_recoveries == 1 and sent == 2
    finally:
        asyncio.run(store.close())
