"""OpenAI chat/completions SSE replies for the replay server (the sidecar tests' model)."""

from __future__ import annotations

import json
from typing import Any

from tests.replay_server import Reply


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    body["choices"] = [] if delta is None and finish is None else [
        {"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def text_chunks(pieces: list[str], *, prompt_tokens: int = 50, completion_tokens: int = 10) -> list[bytes]:
    out = [_chunk({"role": "assistant", "content": ""})]
    out += [_chunk({"content": piece}) for piece in pieces]
    out += [_chunk({}, "stop"), _chunk(usage=_usage(prompt_tokens, completion_tokens)), b"data: [DONE]\n\n"]
    return out


def text_reply(pieces: list[str], *, delay_s: float = 0.0, **kwargs: Any) -> Reply:
    return Reply(chunks=text_chunks(pieces, **kwargs), delay_s=delay_s)


def tool_reply(calls: list[tuple[str, str, dict[str, Any]]], *, text: str = "", prompt_tokens: int = 60) -> Reply:
    """A response that ends in tool calls (arguments split across two chunks each)."""
    out = [_chunk({"role": "assistant", "content": text or None})]
    for index, (call_id, name, arguments) in enumerate(calls):
        encoded = json.dumps(arguments)
        half = len(encoded) // 2
        out.append(_chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": encoded[:half]}}]}))
        out.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": encoded[half:]}}]}))
    out += [_chunk({}, "tool_calls"), _chunk(usage=_usage(prompt_tokens, 12)), b"data: [DONE]\n\n"]
    return Reply(chunks=out)


def script_entry(reply: Reply) -> dict[str, Any]:
    """The reply as an entry of a ``python -m tests.replay_server`` script file."""
    return {"status": reply.status, "headers": reply.headers, "chunks": [c.decode() for c in reply.chunks],
            "delayS": reply.delay_s, **({"dropAfter": reply.drop_after} if reply.drop_after is not None else {})}
