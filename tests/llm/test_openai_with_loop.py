"""CoreLoop driving both OpenAI providers over real HTTP: a tool round, then the answer.

The second request must carry the assistant's call and the tool's result in each wire's own form.
"""

from __future__ import annotations

import json

from steerable_agent_runtime.llm import OpenAICompatProvider, OpenAIResponsesProvider
from steerable_agent_runtime.loop import CoreLoop

from tests.llm.openai_cases import KEY
from tests.llm.streams import make_openai_streams as gen
from tests.loop.kit import USER, completion, make_router, run_loop
from tests.replay_server import ReplayServer, Reply, split_events


def sse(text: str) -> Reply:
    return Reply(chunks=split_events(text.encode()))


def chat_call() -> str:
    frags = gen.call_fragments(0, "call_loop1", "read_note", json.dumps({"name": "x"}), 4)
    return "".join([*frags, gen.chunk({}, "tool_calls"), gen.chunk(choices=False, usage=gen.usage(50, 9)),
                    "data: [DONE]\n\n"])


def responses_call() -> str:
    ev = gen.Events()
    gen.r_start(ev)
    item = gen.r_call(ev, 0, "call_loop1", "read_note", json.dumps({"name": "x"}), 4)
    ev.add("response.completed", response=gen.response("completed", [item], gen.r_usage(50, 9)))
    return ev.text()


def test_chat_completions_tool_round_then_answer():
    router, log = make_router()
    with ReplayServer([sse(chat_call()), sse(gen.chat_text("Note x says: note x."))]) as server:
        provider = OpenAICompatProvider("gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY)
        events = run_loop(CoreLoop(provider, router), USER)
        second = server.requests[1].json()
    assert completion(events)["status"] == "completed" and log == [("read_note", "x")]
    assistant, result = second["messages"][-2:]
    assert assistant["tool_calls"][0]["id"] == "call_loop1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"name": "x"}
    assert result["role"] == "tool" and result["tool_call_id"] == "call_loop1" and "note x" in result["content"]
    assert {t["function"]["name"] for t in second["tools"]} >= {"read_note", "write_note"}


def test_responses_tool_round_then_answer():
    router, log = make_router()
    with ReplayServer([sse(responses_call()), sse(gen.responses_text())]) as server:
        provider = OpenAIResponsesProvider("gpt-4.1-mini", KEY, base_url=server.url + "/v1")
        events = run_loop(CoreLoop(provider, router), USER)
        second = server.requests[1].json()
    assert completion(events)["status"] == "completed" and log == [("read_note", "x")]
    call, output = second["input"][-2:]
    assert (call["type"], call["call_id"], json.loads(call["arguments"])) == ("function_call", "call_loop1",
                                                                               {"name": "x"})
    assert output["type"] == "function_call_output" and output["call_id"] == "call_loop1"
    assert "note x" in output["output"]


def test_broken_json_arguments_become_a_failed_result_the_model_reads_and_the_loop_goes_on():
    # The model's arguments are not JSON: a failed tool result in the next request, not a failed turn.
    frags = gen.call_fragments(0, "call_bad1", "read_note", '{"name": "x"', 3)
    broken = "".join([*frags, gen.chunk({}, "tool_calls"), gen.chunk(choices=False, usage=gen.usage(50, 9)),
                      "data: [DONE]\n\n"])
    router, log = make_router()
    with ReplayServer([sse(broken), sse(gen.chat_text("Sorry, let me fix that."))]) as server:
        provider = OpenAICompatProvider("gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY)
        events = run_loop(CoreLoop(provider, router), USER)
        second = server.requests[1].json()
    assert completion(events)["status"] == "completed" and log == []
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == "call_bad1"
    error = json.loads(result["content"])
    assert error["success"] is False and "not a JSON object" in error["error"] and '{"name": "x"' in error["error"]


def test_a_reply_that_streamed_nothing_goes_back_as_empty_text_not_null():
    # The loop keeps a reply that streamed neither text nor a call as an assistant message with
    # content "" (loop/turn.py). chat/completions takes a null content only beside tool_calls:
    # OpenAI answers 400 "Invalid value for 'content': expected a string, got null" and Ollama
    # "invalid message content type: <nil>", so every later request of that chat failed.
    empty = "".join([gen.chunk({"role": "assistant", "content": ""}), gen.chunk({}, "stop"), "data: [DONE]\n\n"])
    router, _ = make_router()
    with ReplayServer([sse(empty), sse(chat_call()), sse(gen.chat_text("Here."))]) as server:
        provider = OpenAICompatProvider("gpt-4.1-mini", base_url=server.url + "/v1", api_key=KEY)
        loop = CoreLoop(provider, router)
        run_loop(loop, USER)
        events = run_loop(CoreLoop(provider, router), [*loop.transcript, {"role": "user", "content": "hello?"}])
        second, third = (r.json() for r in server.requests[1:])
    assert completion(events)["status"] == "completed"
    assert second["messages"][1] == {"role": "assistant", "content": ""}
    assert third["messages"][1] == {"role": "assistant", "content": ""}
    # beside tool calls the content stays null, as OpenAI itself returns it and the SDK sends it
    assert third["messages"][3]["content"] is None and third["messages"][3]["tool_calls"]
