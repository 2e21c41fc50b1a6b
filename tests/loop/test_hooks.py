"""Hooks in the loop: ChainHooks rule by rule, RetryHooks, request_compact, rewrites in the record."""

from __future__ import annotations

import random

from steerable_agent_runtime import InMemoryStorage, resume_transcript
from steerable_agent_runtime.llm import (
    LLMError,
    RetryPolicy,
    ScriptedProvider,
    ScriptedResponse,
)
from steerable_agent_runtime.loop import (
    CacheDriftMonitor,
    ChainHooks,
    CoreLoop,
    LoopContext,
    LoopHooks,
    PreStepAction,
    RetryAction,
    RetryHooks,
    RewriteRequest,
)
from steerable_agent_runtime.models import LLMMessage, ToolCall
from steerable_agent_runtime.tools import ToolResult

from tests.helpers import run
from tests.loop.kit import USER, completion, kinds, run_loop


def msg(text: str, role: str = "user") -> LLMMessage:
    return LLMMessage(role=role, content=text)


class Fixed(LoopHooks):
    """Returns the given values and records the transcripts it saw."""

    def __init__(self, pre=None, compact=None, retry=None, post=None, done=None):
        self.pre, self.compact, self.retry, self.post, self.done = pre, compact, retry, post, done
        self.seen: list[list[LLMMessage]] = []
        self.compact_calls = 0

    async def pre_step(self, transcript, ctx):
        self.seen.append(list(transcript))
        return self.pre

    async def compact_now(self, transcript, ctx):
        self.compact_calls += 1
        return self.compact

    async def on_request_error(self, error, transcript, ctx):
        return self.retry

    async def post_tool_result(self, result, call, ctx):
        return self.post(result) if self.post else None

    async def before_completion(self, draft, ctx):
        return self.done


CTX = LoopContext(chat_id="c1")
T = [msg("hello")]


def test_chain_first_reject_wins():
    later = Fixed(pre=PreStepAction.reject("second"))
    chain = ChainHooks(Fixed(pre=PreStepAction.proceed(appends=[msg("a")])), Fixed(pre=PreStepAction.reject("first")),
                       later)
    action = run(chain.pre_step(T, CTX))
    assert action.action == "reject" and action.reason == "first"
    assert later.seen == []  # nothing after the reject runs


def test_chain_rewrite_drops_earlier_appends_and_folds_later_ones_keeping_its_tokens():
    rewrite = RewriteRequest([msg("summary", "system")], "pressure", "pressure", pre_tokens=900, post_tokens=90)
    third = Fixed(pre=PreStepAction.proceed(appends=[msg("after")]))
    chain = ChainHooks(Fixed(pre=PreStepAction.proceed(appends=[msg("before")])),
                       Fixed(pre=PreStepAction.proceed(rewrite=rewrite)), third)
    action = run(chain.pre_step(T, CTX))
    assert action.appends == []
    assert [m.content for m in action.rewrite.messages] == ["summary", "after"]
    assert (action.rewrite.pre_tokens, action.rewrite.post_tokens) == (900, 90)
    assert [m.content for m in rewrite.messages] == ["summary"]  # the hook's own request is not mutated
    assert [m.content for m in third.seen[0]] == ["summary"]  # a later hook sees the rewritten transcript


def test_chain_appends_accumulate_and_later_hooks_see_them():
    second = Fixed(pre=PreStepAction.proceed(appends=[msg("b")]))
    chain = ChainHooks(Fixed(pre=PreStepAction.proceed(appends=[msg("a")])), second, Fixed())
    action = run(chain.pre_step(T, CTX))
    assert [m.content for m in action.appends] == ["a", "b"] and action.rewrite is None
    assert [m.content for m in second.seen[0]] == ["hello", "a"]
    assert run(ChainHooks(Fixed(), Fixed()).pre_step(T, CTX)) is None


def test_chain_first_retry_wins_else_first_fail():
    chain = ChainHooks(Fixed(retry=RetryAction.fail("no")), Fixed(retry=RetryAction.retry(10, reason="one")),
                       Fixed(retry=RetryAction.retry(99, reason="two")))
    action = run(chain.on_request_error(LLMError("x", kind="server"), T, CTX))
    assert action.action == "retry" and action.delay_ms == 10
    fail = run(ChainHooks(Fixed(), Fixed(retry=RetryAction.fail("no"))).on_request_error(ValueError(), T, CTX))
    assert fail.action == "fail" and fail.reason == "no"


def test_chain_forwards_compact_now_to_the_first_hook_with_a_rewrite():
    rewrite = RewriteRequest([msg("s", "system")], "manual", "manual", 10, 2)
    first, second, third = Fixed(), Fixed(compact=rewrite), Fixed(compact=RewriteRequest([], "x"))
    assert run(ChainHooks(first, second, third).compact_now(T, CTX)) is rewrite
    assert (first.compact_calls, second.compact_calls, third.compact_calls) == (1, 1, 0)


def test_chain_post_tool_result_passes_replacements_along():
    chain = ChainHooks(Fixed(post=lambda r: ToolResult(success=True, data=f"{r.data}+1")),
                       Fixed(post=lambda r: ToolResult(success=True, data=f"{r.data}+2")))
    out = run(chain.post_tool_result(ToolResult(success=True, data="0"), ToolCall(id="c", name="t"), CTX))
    assert out.data == "0+1+2"


def test_chain_before_completion_reject_wins_and_appends_concatenate():
    chain = ChainHooks(Fixed(done=PreStepAction.proceed(appends=[msg("x")])),
                       Fixed(done=PreStepAction.proceed(appends=[msg("y")])))
    assert [m.content for m in run(chain.before_completion(msg("d", "assistant"), CTX)).appends] == ["x", "y"]
    chain = ChainHooks(Fixed(done=PreStepAction.proceed(appends=[msg("x")])), Fixed(done=PreStepAction.reject("no")))
    assert run(chain.before_completion(msg("d", "assistant"), CTX)).action == "reject"


def test_retry_hooks_follow_the_policy():
    hooks = RetryHooks(RetryPolicy(rng=random.Random(1)))
    server = LLMError("busy", kind="server")
    first = run(hooks.on_request_error(server, T, LoopContext(chat_id="c", attempt=1)))
    assert first.action == "retry" and 160 <= first.delay_ms <= 240
    second = run(hooks.on_request_error(server, T, LoopContext(chat_id="c", attempt=2)))
    assert 320 <= second.delay_ms <= 480
    assert run(hooks.on_request_error(server, T, LoopContext(chat_id="c", attempt=3))) is None
    assert run(hooks.on_request_error(LLMError("key", kind="auth"), T, LoopContext(chat_id="c"))) is None
    limited = LLMError("slow", kind="rate_limit", retry_after_ms=1500)
    assert run(hooks.on_request_error(limited, T, LoopContext(chat_id="c"))).delay_ms == 1500


def test_retry_in_the_loop_shows_two_attempts():
    err = LLMError("overloaded", kind="server", status_code=503)
    provider = ScriptedProvider([ScriptedResponse(error=err), "second time lucky"])
    hooks = RetryHooks(RetryPolicy(base_delay_ms=1))
    events = run_loop(CoreLoop(provider, hooks=hooks), USER)
    assert [e.data for e in events if e.kind == "llm_request"] == [{"round": 0, "attempt": 1}, {"round": 0, "attempt": 2}]
    assert [e.data.get("errorKind") for e in events if e.kind == "llm_response"] == ["server", None]
    assert completion(events)["status"] == "completed"
    assert provider.requests[0].messages == provider.requests[1].messages


def test_pre_step_rewrite_is_one_boundary_and_the_next_request_sends_it():
    store = InMemoryStorage()
    rewrite = RewriteRequest([msg("summary of before", "system"), msg("go")], "pressure", "pressure", 5000, 400)

    class Once(LoopHooks):
        async def pre_step(self, transcript, ctx):
            return PreStepAction.proceed(rewrite=rewrite, appends=[msg("[notice] compacted", "system")]) \
                if ctx.round_index == 1 else None

    provider = ScriptedProvider([ScriptedResponse(tool_calls=[{"name": "nothing"}]), "done"])
    events = run_loop(CoreLoop(provider, hooks=Once(), storage=store), USER)
    [action] = [e.data for e in events if e.kind == "hook_action" and e.data["action"] == "rewrite"]
    assert action == {"hook": "Once", "action": "rewrite", "reason": "pressure", "trigger": "pressure",
                      "preTokens": 5000, "postTokens": 400}
    entries = run(store.list_history("c1"))
    boundaries = [e for e in entries if e["type"] == "compaction_boundary"]
    assert len(boundaries) == 1 and boundaries[0]["preTokens"] == 5000 and boundaries[0]["trigger"] == "pressure"
    assert provider.requests[1].messages == [*rewrite.messages, msg("[notice] compacted", "system")]
    assert run(resume_transcript(store, "c1")) == [*provider.requests[1].messages, msg("done", "assistant")]


def test_request_compact_runs_after_pre_step_through_the_rewrite_path():
    store = InMemoryStorage()
    order = []

    class Compactor(LoopHooks):
        async def pre_step(self, transcript, ctx):
            order.append("pre_step")

        async def compact_now(self, transcript, ctx):
            order.append("compact_now")
            return RewriteRequest([msg("manual summary", "system")], "manual", "manual", 300, 30)

    loop = CoreLoop(ScriptedProvider(["after compaction"]), hooks=ChainHooks(Compactor()), storage=store)
    assert loop.request_compact() is True
    events = run_loop(loop, USER)
    assert order == ["pre_step", "compact_now"]
    [action] = [e.data for e in events if e.kind == "hook_action"]
    assert action["action"] == "compact" and action["trigger"] == "manual" and action["postTokens"] == 30
    boundary = [e for e in run(store.list_history("c1")) if e["type"] == "compaction_boundary"]
    assert boundary[0]["trigger"] == "manual"
    assert loop.provider.requests[0].messages == [msg("manual summary", "system")]
    # consumed: a second turn does not compact again
    run_loop(CoreLoop(ScriptedProvider(["x"]), hooks=Compactor()), USER)
    assert order.count("compact_now") == 1


def test_request_compact_with_nothing_to_do_says_so():
    loop = CoreLoop(ScriptedProvider(["ok"]))
    loop.request_compact()
    events = run_loop(loop, USER)
    assert [e.data["action"] for e in events if e.kind == "hook_action"] == ["compact_noop"]


def test_a_reject_ends_the_turn_before_a_requested_compaction():
    hooks = Fixed(pre=PreStepAction.reject("over quota"), compact=RewriteRequest([msg("s")], "m", "manual"))
    provider = ScriptedProvider(["never"])
    loop = CoreLoop(provider, hooks=hooks)
    loop.request_compact()
    events = run_loop(loop, USER)
    assert hooks.compact_calls == 0 and provider.requests == []
    assert [e.data["action"] for e in events if e.kind == "hook_action"] == ["reject"]
    assert completion(events) | {"usage": None} == {"status": "failed", "reason": "over quota", "usage": None,
                                                     "rounds": 0, "traceId": None}


def test_before_completion_appends_continue_the_loop():
    class Nudge(LoopHooks):
        fired = False

        async def before_completion(self, draft, ctx):
            if self.fired:
                return None
            self.fired = True
            return PreStepAction.proceed(appends=[msg("you forgot the tests")])

    provider = ScriptedProvider(["done?", "done, with tests"])
    events = run_loop(CoreLoop(provider, hooks=Nudge()), USER)
    assert completion(events)["status"] == "completed" and len(provider.requests) == 2
    assert provider.requests[1].messages[-2:] == [msg("done?", "assistant"), msg("you forgot the tests")]


def test_retry_rewrite_on_overflow_goes_through_the_record():
    store = InMemoryStorage()
    overflow = LLMError("prompt is too long", kind="context_overflow", status_code=400)

    class Overflow(LoopHooks):
        async def on_request_error(self, error, transcript, ctx):
            if error.kind == "context_overflow":
                return RetryAction.retry(0, rewrite=RewriteRequest([msg("short")], "overflow", "overflow", 9000, 100))
            return None

    provider = ScriptedProvider([ScriptedResponse(error=overflow), "fits now"])
    events = run_loop(CoreLoop(provider, hooks=Overflow(), storage=store), USER)
    assert completion(events)["status"] == "completed"
    assert provider.requests[1].messages == [msg("short")]
    assert [e["trigger"] for e in run(store.list_history("c1")) if e["type"] == "compaction_boundary"] == ["overflow"]
    assert "hook_action" in kinds(events)


def test_cache_drift_monitor_arms_flags_and_resets():
    monitor = CacheDriftMonitor(min_prompt_tokens=1000, min_hit_rate=0.5, consecutive_rounds=3)

    def observe(round_index, prompt, cached):
        ctx = LoopContext(chat_id="c", round_index=round_index, last_prompt_tokens=prompt,
                          last_prompt_transcript_len=round_index, last_cached_prompt_tokens=cached)
        run(monitor.pre_step([], ctx))

    observe(0, 5000, 0)
    observe(1, 5000, 0)
    assert not monitor.armed and monitor.low_streak == 0  # no cache accounting yet: never arms
    observe(2, 5000, 4000)
    assert monitor.armed and not monitor.drift_detected
    observe(3, 5000, 100)
    observe(4, 5000, 100)
    observe(4, 5000, 100)  # the same request seen twice counts once
    observe(5, 500, 0)  # a small prompt changes nothing
    assert monitor.low_streak == 2 and not monitor.drift_detected
    observe(6, 5000, 0)
    assert monitor.drift_detected
    observe(7, 5000, 4500)
    assert not monitor.drift_detected and monitor.low_streak == 0


def test_cache_drift_monitor_in_a_real_loop_sees_each_request():
    from steerable_agent_runtime.llm import LLMUsage

    monitor = CacheDriftMonitor(min_prompt_tokens=10, consecutive_rounds=2)
    usages = [LLMUsage(100, 1, 101, 90), LLMUsage(100, 1, 101, 0), LLMUsage(100, 1, 101, 0), LLMUsage(100, 1, 101, 0)]
    script = [ScriptedResponse(tool_calls=[{"name": "x", "arguments": {"n": i}}], usage=u) for i, u in enumerate(usages)]
    from steerable_agent_runtime.tools import ToolRouter

    router = ToolRouter()
    router.register(_echo, name="x", description="echo")
    run_loop(CoreLoop(ScriptedProvider([*script, "end"]), router, hooks=monitor), USER)
    assert monitor.rounds_observed == 4 and monitor.drift_detected


async def _echo(n: int) -> int:
    return n


def test_chain_hands_later_hooks_llm_messages_when_an_earlier_hook_gave_wire_dicts():
    # A hook may give its messages as wire dicts (docs/loop.md); every later hook of the chain
    # still gets a transcript of LLMMessages, as the loop gives the first.
    second = Fixed(pre=PreStepAction.proceed(appends=[msg("b")]))
    chain = ChainHooks(Fixed(pre=PreStepAction.proceed(appends=[{"role": "user", "content": "a"}])), second)
    action = run(chain.pre_step(T, CTX))
    assert all(type(m) is LLMMessage for m in second.seen[0]) and [m.content for m in second.seen[0]] == ["hello", "a"]
    assert [m.content for m in action.appends] == ["a", "b"]
    rewrite = RewriteRequest([{"role": "system", "content": "summary"}], "r")
    third = Fixed()
    action = run(ChainHooks(Fixed(pre=PreStepAction.proceed(rewrite=rewrite)), third).pre_step(T, CTX))
    assert [type(m) for m in third.seen[0]] == [LLMMessage] and action.rewrite.messages == [msg("summary", "system")]
    assert rewrite.messages == [{"role": "system", "content": "summary"}]  # the hook's own request is not mutated


def test_chain_with_a_dict_appending_hook_before_the_notes_hook_runs_in_a_loop(tmp_path):
    from steerable_agent_runtime.context import FilesystemState

    notes = tmp_path / "AGENTS.md"
    notes.write_text("Use tabs.")

    class Greeter(LoopHooks):
        async def pre_step(self, transcript, ctx):
            return PreStepAction.proceed(appends=[{"role": "user", "content": "host note"}])

    provider = ScriptedProvider(["ok"])
    events = run_loop(CoreLoop(provider, hooks=ChainHooks(Greeter(), FilesystemState(notes))), USER)
    assert completion(events)["status"] == "completed"
    sent = provider.requests[0].messages
    assert sent[-2].content == "host note" and "Use tabs." in sent[-1].content


def test_chain_names_the_hook_whose_message_is_not_one():
    chain = ChainHooks(Fixed(pre=PreStepAction.proceed(appends=[{"role": "robot"}])), Fixed())
    provider = ScriptedProvider(["ok"])
    events = run_loop(CoreLoop(provider, hooks=chain), USER)
    assert completion(events)["status"] == "failed" and provider.requests == []
    [error] = [e.data for e in events if e.kind == "error"]
    assert error["kind"] == "hook" and "Fixed.pre_step gave a message that is not one" in error["message"]


def test_cache_drift_monitor_does_not_count_a_request_again_when_the_next_reports_no_usage():
    # A response without usage leaves LoopContext's figures at the request before it: that
    # request was already observed, so the rounds after it add no low rounds of their own.
    from dataclasses import replace as replaced

    from steerable_agent_runtime.llm import LLMUsage
    from steerable_agent_runtime.tools import ToolRouter

    class SilentAfter(ScriptedProvider):
        """Reports usage for the first ``n`` requests only (a proxy that drops usage chunks)."""

        def __init__(self, responses, n):
            super().__init__(responses)
            self.n = n

        async def _replay(self, index, messages, cancel):
            async for chunk in super()._replay(index, messages, cancel):
                yield chunk if index < self.n or chunk.usage is None else replaced(chunk, usage=None)

    monitor = CacheDriftMonitor(min_prompt_tokens=10, consecutive_rounds=2)
    usages = [LLMUsage(100, 1, 101, 90), LLMUsage(100, 1, 101, 0), None, None]
    script = [ScriptedResponse(tool_calls=[{"name": "x", "arguments": {"n": i}}], usage=u) for i, u in enumerate(usages)]
    router = ToolRouter()
    router.register(_echo, name="x", description="echo")
    run_loop(CoreLoop(SilentAfter([*script, "end"], 2), router, hooks=monitor), USER)
    assert monitor.rounds_observed == 2  # the two requests that reported usage, each once
    assert monitor.low_streak == 1 and not monitor.drift_detected


def test_a_rewrite_that_would_leave_a_transcript_no_provider_takes_fails_the_turn_and_writes_nothing():
    # An empty transcript, or a tool result whose call the rewrite dropped, is refused by every
    # provider, and in the record it would make the chat unresumable (resume refuses a record
    # whose transcript holds such a result). The rewrite is a HookError naming the hook; the
    # transcript and the record stay as they were.
    call = {"id": "call_1", "name": "read", "arguments": {}}
    calling = LLMMessage(role="assistant", tool_calls=[call])
    result = LLMMessage(role="tool", tool_call_id="call_1", name="read", content="{}")
    for messages, words in (([], "empty"), ([msg("summary", "system"), result], "call_1")):
        store = InMemoryStorage()

        class Bad(LoopHooks):
            async def pre_step(self, transcript, ctx, messages=messages):
                return PreStepAction.proceed(rewrite=RewriteRequest(messages, "pressure", "pressure", 900, 10))

        provider = ScriptedProvider(["never sent"])
        events = run_loop(CoreLoop(provider, hooks=Bad(), storage=store), [*USER, calling, result])
        assert completion(events)["status"] == "failed" and provider.requests == []
        [error] = [e.data for e in events if e.kind == "error"]
        assert "Bad" in error["message"] and words in error["message"], error
        entries = run(store.list_history("c1"))
        assert [e["type"] for e in entries] == ["item", "item", "item"]
        assert run(resume_transcript(store, "c1")) == [LLMMessage(**USER[0]), calling, result]
