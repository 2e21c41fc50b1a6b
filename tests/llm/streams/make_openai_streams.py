"""Write the OpenAI wire fixtures (chat/completions and Responses) deterministically.

The files are what the OpenAI API streams for each case (field for field, as the API docs and
the official SDK's types describe them), compact JSON as the API sends it. The tests replay
them over real HTTP and check that the official ``openai`` SDK parses every one to the same
text, tool calls and usage as our adapters. Run from the repository root to regenerate:

    python tests/llm/streams/make_openai_streams.py
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
CREATED = 1764547200
MODEL = "gpt-4.1-mini-2025-04-14"
R_MODEL = "gpt-5-mini-2025-08-07"  # a reasoning model: its streams carry encrypted reasoning


def dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# ---- chat/completions -------------------------------------------------------------------

def chunk(delta: dict | None = None, finish: str | None = None, *, usage: dict | None = None,
          choices: bool = True) -> str:
    obj = {"id": "chatcmpl-C1x9lZq2Rk7Tfixture", "object": "chat.completion.chunk", "created": CREATED,
           "model": MODEL, "service_tier": "default", "system_fingerprint": "fp_6f2eabb9a5",
           "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}] if choices else [],
           "usage": usage}
    return f"data: {dumps(obj)}\n\n"


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}}


def text_chunks(text: str, size: int = 5) -> list[str]:
    out = [chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [chunk({"content": text[i:i + size]}) for i in range(0, len(text), size)]
    return out


def chat_text(text: str = "Lisbon is the capital of Portugal; it sits on the Tagus.", cached: int = 0) -> str:
    return "".join([*text_chunks(text), chunk({}, "stop"), chunk(choices=False, usage=usage(1240, 14, cached)),
                    "data: [DONE]\n\n"])


def call_fragments(index: int, call_id: str, name: str, args: str, size: int) -> list[str]:
    first = {"tool_calls": [{"index": index, "id": call_id, "type": "function",
                             "function": {"name": name, "arguments": ""}}]}
    if index == 0:
        first = {"role": "assistant", "content": None, **first}
    out = [chunk(first)]
    out += [chunk({"tool_calls": [{"index": index, "function": {"arguments": args[i:i + size]}}]})
            for i in range(0, len(args), size)]
    return out


def chat_tool_calls() -> str:
    one = dumps({"city": "Lisbon", "unit": "celsius"})
    two = dumps({"path": "notes/trip.md", "lines": [1, 40], "query": "hôtel \"Avenida\""})
    parts = call_fragments(0, "call_Ab12Cd34Ef56Gh78", "get_weather", one, 3)
    parts += call_fragments(1, "call_Zy98Xw76Vu54Ts32", "read_file", two, 4)
    return "".join([*parts, chunk({}, "tool_calls"), chunk(choices=False, usage=usage(310, 58)), "data: [DONE]\n\n"])


def chat_reasoning() -> str:
    thought = "The user asks for 17*3. 17*3 = 51."
    out = [chunk({"role": "assistant", "content": None, "reasoning_content": ""})]
    out += [chunk({"content": None, "reasoning_content": thought[i:i + 6]}) for i in range(0, len(thought), 6)]
    out += [chunk({"content": "17 × 3 = "}), chunk({"content": "51."})]
    return "".join([*out, chunk({}, "stop"), chunk(choices=False, usage=usage(22, 30, reasoning=21)), "data: [DONE]\n\n"])


def chat_error_mid_stream() -> str:
    error = {"error": {"message": "The server had an error while processing your request. Sorry about that!",
                       "type": "server_error", "param": None, "code": None}}
    return "".join([*text_chunks("Here is the first part of"), f"data: {dumps(error)}\n\n"])


def chat_malformed() -> str:
    return "".join([*text_chunks("Hello"), 'data: {"id":"chatcmpl-x","choices":[{"delta":{"content":"wor\n\n'])


# ---- Responses ----------------------------------------------------------------------------

def response(status: str, output: list, usage_: dict | None = None, **extra: object) -> dict:
    return {"id": "resp_68a1f0fixture", "object": "response", "created_at": CREATED, "status": status,
            "background": False, "error": None, "incomplete_details": None, "instructions": None,
            "max_output_tokens": None, "model": MODEL, "output": output, "parallel_tool_calls": True,
            "previous_response_id": None, "reasoning": {"effort": None, "summary": None}, "store": False,
            "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto",
            "tools": [], "top_p": 1.0, "truncation": "disabled", "usage": usage_, "user": None, "metadata": {},
            **extra}


def r_usage(inp: int, out: int, cached: int = 0, reasoning: int = 0) -> dict:
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": inp + out}


class Events:
    def __init__(self) -> None:
        self.seq = 0
        self.out: list[str] = []

    def add(self, type_: str, **fields: object) -> None:
        obj = {"type": type_, "sequence_number": self.seq, **fields}
        self.seq += 1
        self.out.append(f"event: {type_}\ndata: {dumps(obj)}\n\n")

    def text(self) -> str:
        return "".join(self.out)


def r_message(ev: Events, index: int, text: str, size: int = 6) -> dict:
    item_id = f"msg_68a1f0{index:02d}fixture"
    ev.add("response.output_item.added", output_index=index,
           item={"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})
    empty = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    ev.add("response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=empty)
    for i in range(0, len(text), size):
        ev.add("response.output_text.delta", item_id=item_id, output_index=index, content_index=0,
               delta=text[i:i + size], logprobs=[])
    ev.add("response.output_text.done", item_id=item_id, output_index=index, content_index=0, text=text, logprobs=[])
    part = {**empty, "text": text}
    ev.add("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
    item = {"id": item_id, "type": "message", "status": "completed", "content": [part], "role": "assistant"}
    ev.add("response.output_item.done", output_index=index, item=item)
    return item


def r_call(ev: Events, index: int, call_id: str, name: str, args: str, size: int) -> dict:
    item_id = f"fc_68a1f0{index:02d}fixture"
    head = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id,
            "name": name}
    ev.add("response.output_item.added", output_index=index, item=head)
    for i in range(0, len(args), size):
        ev.add("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=args[i:i + size])
    ev.add("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=args)
    item = {**head, "status": "completed", "arguments": args}
    ev.add("response.output_item.done", output_index=index, item=item)
    return item


def encrypted(seed: str, size: int = 240) -> str:
    """A deterministic stand-in for an encrypted_content token (Fernet's ``gAAAAA`` prefix)."""
    raw = b"".join(hashlib.sha256(f"{seed}/{i}".encode()).digest() for i in range(size // 32 + 1))[:size]
    return "gAAAAABpLbQA" + base64.urlsafe_b64encode(raw).decode()


def r_reasoning(ev: Events, index: int, summary: str, size: int = 7, *, sealed: str | None = None) -> dict:
    """A reasoning item with its summary streamed; with ``sealed``, what the API streams when
    asked for ``reasoning.encrypted_content``: a token in the added item and a different,
    final one in the done item (it encrypts each copy afresh; the done one is to be sent back)."""
    item_id = f"rs_68a1f0{index:02d}fixture"
    head = {"id": item_id, "type": "reasoning", "summary": []}
    if sealed is not None:
        head = {"id": item_id, "type": "reasoning", "encrypted_content": encrypted(f"{sealed}/added"), "summary": []}
    ev.add("response.output_item.added", output_index=index, item=head)
    ev.add("response.reasoning_summary_part.added", item_id=item_id, output_index=index, summary_index=0,
           part={"type": "summary_text", "text": ""})
    for i in range(0, len(summary), size):
        ev.add("response.reasoning_summary_text.delta", item_id=item_id, output_index=index, summary_index=0,
               delta=summary[i:i + size])
    ev.add("response.reasoning_summary_text.done", item_id=item_id, output_index=index, summary_index=0, text=summary)
    part = {"type": "summary_text", "text": summary}
    ev.add("response.reasoning_summary_part.done", item_id=item_id, output_index=index, summary_index=0, part=part)
    item = {**head, "summary": [part]}
    if sealed is not None:
        item["encrypted_content"] = encrypted(f"{sealed}/done")
    ev.add("response.output_item.done", output_index=index, item=item)
    return item


def r_reasoning_text(ev: Events, index: int, text: str, size: int = 8) -> dict:
    """A reasoning item with raw reasoning text and no encrypted_content (what a local server
    running an open-weight model streams, vLLM for one)."""
    item_id = f"rs_68a1f0{index:02d}fixture"
    ev.add("response.output_item.added", output_index=index,
           item={"id": item_id, "type": "reasoning", "summary": [], "content": [], "status": "in_progress"})
    ev.add("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
           part={"type": "reasoning_text", "text": ""})
    for i in range(0, len(text), size):
        ev.add("response.reasoning_text.delta", item_id=item_id, output_index=index, content_index=0,
               delta=text[i:i + size])
    ev.add("response.reasoning_text.done", item_id=item_id, output_index=index, content_index=0, text=text)
    part = {"type": "reasoning_text", "text": text}
    ev.add("response.content_part.done", item_id=item_id, output_index=index, content_index=0, part=part)
    item = {"id": item_id, "type": "reasoning", "summary": [], "content": [part], "status": "completed"}
    ev.add("response.output_item.done", output_index=index, item=item)
    return item


def r_start(ev: Events, **extra: object) -> None:
    ev.add("response.created", response=response("in_progress", [], **extra))
    ev.add("response.in_progress", response=response("in_progress", [], **extra))


R_REASONING = {"model": R_MODEL, "reasoning": {"effort": "medium", "summary": "auto"}}


def sealed_copy(item: dict, seed: str) -> dict:
    """The item as response.completed lists it: encrypted once more (another token)."""
    return {**item, "encrypted_content": encrypted(f"{seed}/completed")} if "encrypted_content" in item else item


def responses_text(cached: int = 0) -> str:
    ev = Events()
    r_start(ev)
    item = r_message(ev, 0, "Lisbon is the capital of Portugal; it sits on the Tagus.")
    ev.add("response.completed", response=response("completed", [item], r_usage(1240, 14, cached)))
    return ev.text()


def responses_tool_calls() -> str:
    ev = Events()
    r_start(ev)
    one = r_call(ev, 0, "call_Ab12Cd34Ef56Gh78", "get_weather", dumps({"city": "Lisbon", "unit": "celsius"}), 3)
    two = r_call(ev, 1, "call_Zy98Xw76Vu54Ts32", "read_file",
                 dumps({"path": "notes/trip.md", "lines": [1, 40], "query": "hôtel \"Avenida\""}), 4)
    ev.add("response.completed", response=response("completed", [one, two], r_usage(310, 58)))
    return ev.text()


def responses_reasoning() -> str:
    ev = Events()
    r_start(ev)
    rs = r_reasoning(ev, 0, "**Multiplying** 17 by 3 gives 51.")
    msg = r_message(ev, 1, "17 × 3 = 51.")
    ev.add("response.completed", response=response("completed", [rs, msg], r_usage(22, 30, reasoning=21)))
    return ev.text()


def responses_reasoning_tool_call() -> str:
    """A reasoning model's tool call with include=["reasoning.encrypted_content"]: the reasoning
    item (summary and encrypted_content), then the function_call."""
    ev = Events()
    r_start(ev, **R_REASONING)
    rs = r_reasoning(ev, 0, "**Checking the weather** The user wants Lisbon's weather; I call get_weather.",
                     sealed="rtc0")
    fc = r_call(ev, 1, "call_Rs51LisbonWeather01", "get_weather", dumps({"city": "Lisbon", "unit": "celsius"}), 5)
    ev.add("response.completed", response=response("completed", [sealed_copy(rs, "rtc0"), fc],
                                                   r_usage(180, 210, reasoning=176), **R_REASONING))
    return ev.text()


def responses_reasoning_preamble_calls() -> str:
    """Reasoning, a preamble message, a call, more reasoning, a second call: each reasoning
    item precedes a different item."""
    ev = Events()
    r_start(ev, **R_REASONING)
    rs0 = r_reasoning(ev, 0, "**Planning** Weather first, then the trip notes.", sealed="rpc0")
    msg = r_message(ev, 1, "I'll check the weather, then your notes.")
    one = r_call(ev, 2, "call_Rs52Weather0000001", "get_weather", dumps({"city": "Lisbon"}), 6)
    rs3 = r_reasoning(ev, 3, "**Reading notes** The notes say which hotel.", sealed="rpc3")
    two = r_call(ev, 4, "call_Rs52ReadNotes00002", "read_file", dumps({"path": "notes/trip.md"}), 6)
    output = [sealed_copy(rs0, "rpc0"), msg, one, sealed_copy(rs3, "rpc3"), two]
    ev.add("response.completed", response=response("completed", output, r_usage(260, 330, reasoning=240),
                                                   **R_REASONING))
    return ev.text()


def responses_reasoning_text_tool_call() -> str:
    """An open-weight model behind a local Responses server: raw reasoning text, no
    encrypted_content, then a call."""
    ev = Events()
    local = {"model": "openai/gpt-oss-20b", "reasoning": {"effort": "medium", "summary": None}}
    r_start(ev, **local)
    rs = r_reasoning_text(ev, 0, "The user wants the weather in Lisbon. Call get_weather.")
    fc = r_call(ev, 1, "call_Rs53LocalWeather001", "get_weather", dumps({"city": "Lisbon"}), 5)
    ev.add("response.completed", response=response("completed", [rs, fc], r_usage(90, 40, reasoning=14), **local))
    return ev.text()


def responses_incomplete() -> str:
    ev = Events()
    r_start(ev)
    item = r_message(ev, 0, "The history of Lisbon begins")
    ev.add("response.incomplete", response=response("incomplete", [item], r_usage(40, 6),
                                                    incomplete_details={"reason": "max_output_tokens"}))
    return ev.text()


def responses_error_mid_stream() -> str:
    ev = Events()
    r_start(ev)
    ev.add("error", code="server_error", message="The server had an error processing your request.", param=None)
    return ev.text()


def responses_failed() -> str:
    ev = Events()
    r_start(ev)
    err = {"code": "rate_limit_exceeded", "message": "Rate limit reached for gpt-4.1-mini on tokens per min (TPM)."}
    ev.add("response.failed", response=response("failed", [], None, error=err))
    return ev.text()


def cut(stream: str, events: int) -> str:
    """The first ``events`` events of ``stream``: what arrived before the connection dropped."""
    return "".join(part + "\n\n" for part in stream.split("\n\n")[:events])


def http_error(status: int, body: dict, headers: dict | None = None) -> str:
    return json.dumps({"status": status, "headers": {"content-type": "application/json", **(headers or {})},
                       "body": body}, indent=2, ensure_ascii=False) + "\n"


OVERFLOW = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages "
                                 "resulted in 131072 tokens. Please reduce the length of the messages.",
                      "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
RATE = {"error": {"message": "Rate limit reached for gpt-4.1-mini in organization org-x on requests per min (RPM): "
                             "Limit 3, Used 3, Requested 1. Please try again in 20s.",
                  "type": "requests", "param": None, "code": "rate_limit_exceeded"}}
SERVER = {"error": {"message": "The server had an error while processing your request. Sorry about that!",
                    "type": "server_error", "param": None, "code": None}}
R_OVERFLOW = {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input "
                                   "and try again.", "type": "invalid_request_error", "param": "input",
                        "code": "context_length_exceeded"}}

FILES = {
    "openai_compat/text.sse": chat_text(),
    "openai_compat/tool_calls.sse": chat_tool_calls(),
    "openai_compat/reasoning.sse": chat_reasoning(),
    "openai_compat/usage_cached.sse": chat_text("Cached answer.", cached=1152),
    "openai_compat/error_mid_stream.sse": chat_error_mid_stream(),
    "openai_compat/malformed.sse": chat_malformed(),
    "openai_compat/dropped_mid_stream.sse": cut(chat_text(), 6),
    "openai_compat/overflow_400.json": http_error(400, OVERFLOW),
    "openai_compat/rate_limit_429.json": http_error(429, RATE, {"retry-after": "20"}),
    "openai_compat/server_500.json": http_error(500, SERVER),
    "openai_responses/text.sse": responses_text(),
    "openai_responses/tool_calls.sse": responses_tool_calls(),
    "openai_responses/reasoning.sse": responses_reasoning(),
    "openai_responses/reasoning_tool_call.sse": responses_reasoning_tool_call(),
    "openai_responses/reasoning_preamble_calls.sse": responses_reasoning_preamble_calls(),
    "openai_responses/reasoning_text_tool_call.sse": responses_reasoning_text_tool_call(),
    "openai_responses/usage_cached.sse": responses_text(cached=1152),
    "openai_responses/incomplete.sse": responses_incomplete(),
    "openai_responses/error_mid_stream.sse": responses_error_mid_stream(),
    "openai_responses/failed.sse": responses_failed(),
    "openai_responses/dropped_mid_stream.sse": cut(responses_tool_calls(), 8),
    "openai_responses/overflow_400.json": http_error(400, R_OVERFLOW),
    "openai_responses/rate_limit_429.json": http_error(429, RATE, {"retry-after": "Tue, 01 Dec 2099 09:00:20 GMT"}),
    "openai_responses/server_500.json": http_error(500, SERVER),
}


def main() -> None:
    for name, text in FILES.items():
        path = HERE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
