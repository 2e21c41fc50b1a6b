"""The floor under the loop's overhead: the bare loop plus only the events CoreLoop yields.

    .venv/bin/python bench/loop_floor.py [--turns 40] [--rounds 8] [--repeats 15]

The same turns as bench/loop_bench.py. ``floor`` is its bare loop (stream the provider,
dispatch through the ToolRouter, build the transcript) turned into an async generator that also
yields the seven events of a tool round, each a LoopEvent with the data the loop gives it
(stage_start, llm_request, content_delta, llm_response, tool_call_start, tool_call_result,
stage_complete; the last round's completion): no guards, hooks, dedup, timing, usage, context or
record. Whatever CoreLoop does, it cannot cost less than this without yielding less; the ratio
floor / bare is what the events alone cost. Printed side by side (interleaved repetitions, CPU
time, medians and minimums per round) with the bare loop and CoreLoop without a storage;
``bench/loop_instructions.py --variants bare,floor,none`` gives the same in instructions.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loop_bench as lb  # noqa: E402 - after the path (it puts the runtime on sys.path)
from steerable_agent_runtime.llm import ScriptedProvider  # noqa: E402
from steerable_agent_runtime.loop import LoopEvent  # noqa: E402
from steerable_agent_runtime.models import LLMMessage  # noqa: E402

ZERO_MS = 0.0


async def _floor_turn(provider, router, transcript):
    round_index = 0
    while True:
        yield LoopEvent("stage_start", {"round": round_index})
        yield LoopEvent("llm_request", {"round": round_index, "attempt": 1})
        text, calls, usage = [], [], None
        async for chunk in provider.stream(transcript, tools=router.describe()):
            if chunk.content_delta:
                text.append(chunk.content_delta)
                yield LoopEvent("content_delta", {"delta": chunk.content_delta})
            if chunk.tool_call is not None:
                calls.append(chunk.tool_call)
            if chunk.usage is not None:
                usage = chunk.usage
        yield LoopEvent("llm_response", {"round": round_index, "attempt": 1, "promptTokens": usage.prompt_tokens,
                                         "cachedPromptTokens": usage.cached_prompt_tokens,
                                         "completionTokens": usage.completion_tokens})
        reply = LLMMessage(role="assistant", content="".join(text) or None,
                           tool_calls=[c.to_wire() for c in calls] or None)
        transcript.append(reply)
        if not calls:
            yield LoopEvent("stage_complete", {"round": round_index, "usage": usage.to_wire()})
            yield LoopEvent("completion", {"status": "completed", "reason": "stop", "usage": usage.to_wire(),
                                           "rounds": round_index + 1, "traceId": None})
            return
        for call in calls:
            yield LoopEvent("tool_call_start", {"id": call.id, "name": call.name, "arguments": call.arguments})
        results = []
        for call in calls:
            result = await router.dispatch(call)
            yield LoopEvent("tool_call_result", {"id": call.id, "name": call.name, "success": result.success,
                                                 "durationMs": ZERO_MS})
            results.append(LLMMessage(role="tool", tool_call_id=call.id, name=call.name, content=result.to_content()))
        transcript.extend(results)
        yield LoopEvent("stage_complete", {"round": round_index, "usage": usage.to_wire()})
        round_index += 1


async def floor_turns(router, turns: int, rounds: int, clock=time.process_time) -> float:
    """``turns`` turns of the floor loop, each event consumed as a CoreLoop caller consumes them."""
    started = clock()
    for turn in range(turns):
        provider = ScriptedProvider(lb.script(rounds, turn), record_messages=False)
        async for _ in _floor_turn(provider, router, [lb.USER]):
            pass
    return clock() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    router = lb.make_router()
    runs = {"bare": lambda: lb.bare_turns(None, router, args.turns, args.rounds),
            "floor": lambda: floor_turns(router, args.turns, args.rounds),
            "loop, no storage": lambda: lb.loop_turns(None, router, args.turns, args.rounds)}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    load_before = os.getloadavg()
    for _ in range(args.repeats):
        for name, run in runs.items():
            samples[name].append(asyncio.run(run()) / (args.turns * args.rounds) * 1e6)
    median_bare, min_bare = statistics.median(samples["bare"]), min(samples["bare"])
    for name, values in samples.items():
        median, fastest = statistics.median(values), min(values)
        print(f"{name:<18} median {median:7.1f} us/round ({median / median_bare:.2f}x bare)"
              f"   fastest {fastest:7.1f} us/round ({fastest / min_bare:.2f}x bare)")
    print("load average (1, 5, 15 min): start {:.2f} {:.2f} {:.2f}, end {:.2f} {:.2f} {:.2f}".format(
        *load_before, *os.getloadavg()))


if __name__ == "__main__":
    main()
