"""OpenAIResponsesProvider keeps a reasoning model's encrypted reasoning and sends it back in place.

Every request goes over real HTTP to the replay server; the recorded streams are written by
make_openai_streams.py. With keep off (the default for a non-reasoning model name) the request
bytes are exactly what they were before the option existed.
"""

from __future__ import annotations

import json

import pytest
from steerable_agent_runtime.llm import LLMError, OpenAIResponsesProvider, ProviderConfigError
from steerable_agent_runtime.llm.http import encode_json
from steerable_agent_runtime.llm.openai_reasoning import MAX_KEPT, ReasoningKeep, is_reasoning_model, place
from steerable_agent_runtime.llm.openai_responses import _ResponsesStream
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.models import LLMMessage

from tests.helpers import run
from tests.llm.openai_cases import KEY, STREAMS, TOOLS, reply, sdk_client
from tests.llm.streams import make_openai_streams as gen
from tests.loop.kit import USER, completion, make_router, run_loop
from tests.replay_server import ReplayServer, Reply, split_events

DIR = "openai_responses"
GPT5 = "gpt-5-mini"
QUESTION = [LLMMessage(role="user", content="Weather in Lisbon?")]
R_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]


def done_items(case: str) -> list[dict]:
    """The output_item.done items of a recorded stream, read from the file."""
    events = [json.loads(line[6:]) for line in (STREAMS / DIR / f"{case}.sse").read_text().splitlines()
              if line.startswith("data: ")]
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


def tool_turn(case: str, model: str = GPT5, results: dict[str, str] | None = None,
              **options) -> tuple[LLMMessage, list]:
    """A request answered by the recorded ``case`` (calls), then one carrying the results."""
    async def go(provider: OpenAIResponsesProvider) -> LLMMessage:
        try:
            message, _ = await provider.complete(QUESTION, tools=TOOLS)
            outputs = [LLMMessage(role="tool", tool_call_id=c["id"], content=(results or {}).get(c["id"], "21 C"))
                       for c in message.tool_calls]
            await provider.complete([*QUESTION, message, *outputs], tools=TOOLS)
            return message
        finally:
            await provider.aclose()

    with ReplayServer([reply(DIR, case), reply(DIR, "text")]) as server:
        message = run(go(OpenAIResponsesProvider(model, KEY, base_url=server.url + "/v1", **options)))
    return message, server.requests


def unused(model: str = GPT5, **kwargs) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(model, KEY, base_url="http://127.0.0.1:1/v1", **kwargs)


def test_second_request_carries_the_reasoning_item_before_its_call():
    message, (first, second) = tool_turn("reasoning_tool_call")
    assert message.tool_calls[0]["id"] == "call_Rs51LisbonWeather01"
    assert first.json()["include"] == second.json()["include"] == ["reasoning.encrypted_content"]
    rs_done, fc_done = done_items("reasoning_tool_call")
    assert second.json()["input"] == [
        {"role": "user", "content": "Weather in Lisbon?"},
        {"type": "reasoning", "id": "rs_68a1f000fixture", "summary": rs_done["summary"],
         "encrypted_content": rs_done["encrypted_content"]},
        {"type": "function_call", "call_id": "call_Rs51LisbonWeather01", "name": "get_weather",
         "arguments": '{"city": "Lisbon", "unit": "celsius"}'},
        {"type": "function_call_output", "call_id": "call_Rs51LisbonWeather01", "output": "21 C"},
    ]


def test_the_item_sent_back_is_what_the_sdk_reads_from_output_item_done():
    _, (_, second) = tool_turn("reasoning_tool_call")
    with ReplayServer([reply(DIR, "reasoning_tool_call")]) as server:
        with sdk_client(server.url + "/v1").responses.stream(model=GPT5, input="hi", store=False, tools=R_TOOLS,
                                                             include=["reasoning.encrypted_content"]) as stream:
            events = list(stream)
        sdk_body = server.requests[0].json()
    added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "reasoning"]
    done = [e.item for e in events if e.type == "response.output_item.done" and e.item.type == "reasoning"]
    sent = second.json()["input"][1]
    assert sdk_body["include"] == ["reasoning.encrypted_content"]
    assert sent == done[0].model_dump(include={"type", "id", "summary", "encrypted_content"})
    assert sent["encrypted_content"] != added[0].encrypted_content  # the final token, not the first one


def test_each_reasoning_item_goes_back_before_the_item_it_preceded():
    results = {"call_Rs52Weather0000001": "21 C", "call_Rs52ReadNotes00002": "Hotel Avenida"}
    message, (_, second) = tool_turn("reasoning_preamble_calls", results=results)
    rs0, _, _, rs3, _ = done_items("reasoning_preamble_calls")
    wire = [(i.get("type") or i["role"], i.get("id") or i.get("call_id")) for i in second.json()["input"]]
    assert wire == [("user", None), ("reasoning", rs0["id"]), ("assistant", None),
                    ("function_call", "call_Rs52Weather0000001"), ("reasoning", rs3["id"]),
                    ("function_call", "call_Rs52ReadNotes00002"),
                    ("function_call_output", "call_Rs52Weather0000001"),
                    ("function_call_output", "call_Rs52ReadNotes00002")]
    assert second.json()["input"][4]["encrypted_content"] == rs3["encrypted_content"]
    assert message.content == "I'll check the weather, then your notes."


def test_a_reasoning_item_without_encrypted_content_is_not_sent_back():
    _, (first, second) = tool_turn("reasoning_text_tool_call", "openai/gpt-oss-20b",
                                        keep_reasoning=True)
    assert first.json()["include"] == ["reasoning.encrypted_content"]
    assert [i.get("type") or i["role"] for i in second.json()["input"]] == ["user", "function_call",
                                                                           "function_call_output"]


def test_keep_off_sends_exactly_the_bytes_it_sent_before():
    # The body the provider sent before keep_reasoning existed, key for key, in order (tools
    # marked non-strict since, as every Responses body's tools are: test_openai_responses.py).
    tools = [{"type": "function", "strict": False, "name": f["name"], "parameters": f["parameters"],
              "description": f["description"]} for f in (t["function"] for t in TOOLS)]
    call = {"type": "function_call", "call_id": "call_Rs51LisbonWeather01", "name": "get_weather",
            "arguments": '{"city": "Lisbon", "unit": "celsius"}'}
    user = {"role": "user", "content": "Weather in Lisbon?"}
    before = [{"model": m, "input": i, "stream": True, "store": False, "tools": tools}
              for m, i in [(GPT5, [user]), (GPT5, [user, call, {"type": "function_call_output",
                                                                 "call_id": call["call_id"], "output": "21 C"}])]]
    _, sent = tool_turn("reasoning_tool_call", keep_reasoning=False)
    assert [r.body for r in sent] == [encode_json(b) for b in before]
    _, default = tool_turn("reasoning_tool_call", "gpt-4.1-mini")
    assert [r.body for r in default] == [encode_json({**b, "model": "gpt-4.1-mini"}) for b in before]


def test_the_default_follows_the_model_name_and_an_explicit_choice_wins():
    assert unused().keep_reasoning is True and unused("gpt-4.1-mini").keep_reasoning is False
    assert unused("gpt-4.1-mini", keep_reasoning=True).build_body(QUESTION)["include"] == ["reasoning.encrypted_content"]
    assert "include" not in unused(keep_reasoning=False).build_body(QUESTION)
    with pytest.raises(ProviderConfigError, match="keep_reasoning") as info:
        unused(keep_reasoning="yes")
    assert info.value.hint


@pytest.mark.parametrize("model,reasons", [
    ("o3", True), ("o4-mini", True), ("o1-preview", True), ("gpt-5", True), ("gpt-5-mini-2025-08-07", True),
    ("gpt-5.1-codex", True), ("codex-mini-latest", True), ("GPT-5-nano", True),
    ("gpt-5-chat-latest", False), ("gpt-4.1-mini", False), ("gpt-4o", False), ("openai/gpt-oss-20b", False),
    ("qwen3:8b", False), ("olmo-2", False), ("omni-moderation-latest", False),
])
def test_reasoning_model_names(model, reasons):
    assert is_reasoning_model(model) is reasons


def test_a_transcript_from_another_process_is_sent_without_the_reasoning():
    message, _ = tool_turn("reasoning_tool_call")
    result = LLMMessage(role="tool", tool_call_id=message.tool_calls[0]["id"], content="21 C")
    body = unused().build_body([*QUESTION, message, result])  # a fresh provider: nothing kept
    assert [i.get("type") or i["role"] for i in body["input"]] == ["user", "function_call", "function_call_output"]
    assert body["include"] == ["reasoning.encrypted_content"]


def test_a_stream_cut_before_it_completed_keeps_nothing():
    events = len(split_events((STREAMS / DIR / "reasoning_tool_call.sse").read_bytes()))
    with ReplayServer([reply(DIR, "reasoning_tool_call", drop_after=events - 1)]) as server:
        provider = OpenAIResponsesProvider(GPT5, KEY, base_url=server.url + "/v1")
        with pytest.raises(LLMError, match="response.completed"):
            run(provider.complete(QUESTION, tools=TOOLS))
        run(provider.aclose())
    assert len(server.requests) == 1 and len(provider._reasoning) == 0


def parsed_output(case: str, rename: str | None = None) -> list[dict]:
    """The output items _ResponsesStream keeps from the recorded stream (call ids renamed)."""
    state = _ResponsesStream("p", "http://127.0.0.1/x", None, keep_output=True)
    for chunk in split_events((STREAMS / DIR / f"{case}.sse").read_bytes()):
        data = next(line[6:] for line in chunk.decode().splitlines() if line.startswith("data: "))
        state.feed(data.replace("call_Rs51", rename) if rename else data)
    return state.output_items()


def test_the_keep_evicts_the_oldest_turn_past_its_limit():
    keep = ReasoningKeep(limit=2)
    for name in ("call_AAAA", "call_BBBB", "call_CCCC"):
        keep.remember(parsed_output("reasoning_tool_call", name))
    firsts = ["call_AAAALisbonWeather01", "call_BBBBLisbonWeather01", "call_CCCCLisbonWeather01"]
    assert len(keep) == 2 and keep.slots(firsts[0]) == {}
    assert [len(keep.slots(f).get(f, [])) for f in firsts[1:]] == [1, 1]
    keep.remember(parsed_output("reasoning_tool_call", "call_BBBB"))  # remembered again: newest now
    keep.remember(parsed_output("reasoning_preamble_calls"))
    assert keep.slots(firsts[2]) == {} and keep.slots(firsts[1]) != {}
    assert keep.slots("call_Rs52Weather0000001") != {}
    assert unused()._reasoning.limit == MAX_KEPT == 1024


def test_a_response_without_calls_or_without_encrypted_reasoning_is_not_kept():
    keep = ReasoningKeep()
    keep.remember(parsed_output("reasoning"))  # reasoning and an answer: the turn is over
    keep.remember(parsed_output("reasoning_text_tool_call"))  # a call, but nothing encrypted
    assert len(keep) == 0
    first, slots = place(done_items("reasoning_preamble_calls"))
    assert first == "call_Rs52Weather0000001" and list(slots) == ["", "call_Rs52ReadNotes00002"]


def test_kept_items_are_copies_a_caller_cannot_change():
    keep = ReasoningKeep()
    keep.remember(parsed_output("reasoning_tool_call"))
    slots = keep.slots("call_Rs51LisbonWeather01")
    slots["call_Rs51LisbonWeather01"][0]["summary"][0]["text"] = "changed"
    assert keep.slots("call_Rs51LisbonWeather01")["call_Rs51LisbonWeather01"][0]["summary"][0]["text"] != "changed"


def loop_call() -> str:
    ev = gen.Events()
    gen.r_start(ev, **gen.R_REASONING)
    rs = gen.r_reasoning(ev, 0, "**Reading** The note named x answers it.", sealed="loop")
    fc = gen.r_call(ev, 1, "call_loop1", "read_note", json.dumps({"name": "x"}), 4)
    ev.add("response.completed", response=gen.response("completed", [rs, fc], gen.r_usage(50, 90, reasoning=60),
                                                       **gen.R_REASONING))
    return ev.text()


def test_core_loop_tool_round_sends_the_reasoning_back():
    router, log = make_router()
    answer = Reply(chunks=split_events(gen.responses_text().encode()))
    with ReplayServer([Reply(chunks=split_events(loop_call().encode())), answer]) as server:
        provider = OpenAIResponsesProvider(GPT5, KEY, base_url=server.url + "/v1")
        events = run_loop(CoreLoop(provider, router), USER)
        second = server.requests[1].json()
    assert completion(events)["status"] == "completed" and log == [("read_note", "x")]
    reasoning, call, output = second["input"][-3:]
    assert reasoning["type"] == "reasoning" and reasoning["encrypted_content"] == gen.encrypted("loop/done")
    assert (call["type"], call["call_id"], output["call_id"]) == ("function_call", "call_loop1", "call_loop1")


@pytest.mark.soak
def test_the_provider_keeps_the_last_1024_turns_over_http():
    def turn(n: int) -> Reply:
        ev = gen.Events()
        gen.r_start(ev, **gen.R_REASONING)
        rs = gen.r_reasoning(ev, 0, "x", sealed=f"soak{n}")
        fc = gen.r_call(ev, 1, f"call_soak{n}", "get_weather", "{}", 5)
        ev.add("response.completed", response=gen.response("completed", [rs, fc], gen.r_usage(1, 1)))
        return Reply(chunks=split_events(ev.text().encode()))

    async def go(provider):
        for n in range(MAX_KEPT + 1):
            await provider.complete(QUESTION, tools=TOOLS)
        await provider.aclose()

    with ReplayServer([turn(n) for n in range(MAX_KEPT + 1)]) as server:
        provider = OpenAIResponsesProvider(GPT5, KEY, base_url=server.url + "/v1")
        run(go(provider))

    def sent_back(call_id: str) -> list:
        message = LLMMessage(role="assistant", tool_calls=[{"id": call_id, "name": "get_weather", "arguments": {}}])
        return [i for i in provider.build_body([message])["input"] if i["type"] == "reasoning"]

    assert sent_back("call_soak0") == [] and len(sent_back("call_soak1")) == len(sent_back(f"call_soak{MAX_KEPT}")) == 1
