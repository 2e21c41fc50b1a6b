"""Compaction benchmarks: the pressure decision per round, and estimate_tokens throughput.

1. Pressure decision per round on a 2,000-message agent transcript (tool calls and results),
   ``CompactionHooks.pre_step`` with the last request's reported prompt tokens known and one
   round (an assistant tool call + its 2 KB result) appended since, against the baseline the
   decision must cost no more than: estimating only those appended messages and comparing
   with the threshold, in a coroutine driven the same way (both sides pay the cost of being an
   async hook call; the figure is about the work inside). Target <= 1.2x. For contrast (not a target): re-estimating the whole
   transcript each round, which pre_step must not do.
2. estimate_tokens on 1 MB of mixed text (English prose, CJK, code, JSON tool arguments) in
   500 messages: MB/s.

Repetitions of ours and of the baseline alternate and medians are compared (the machine is
shared). pre_step is a coroutine that never suspends on this path; it is driven with
``send(None)`` so no event loop's cost is counted on either side.

    .venv/bin/python bench/compaction_bench.py [--reps 15] [--out bench/out/compaction.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from steerable_agent_runtime.compaction import CompactionHooks, estimate_tokens
from steerable_agent_runtime.loop.hooks import LoopContext
from steerable_agent_runtime.models import LLMMessage, ToolCall

CJK = "上下文压缩在长时间运行的代理中很重要。日本語のテキストも混ざります。한국어 문장도 있습니다。"
PROSE = "The agent reads the parser module, runs the tests and writes a short report of what changed. "
CODE = "def parse(tokens):\n    for i, tok in enumerate(tokens):\n        if tok == '(':\n            yield i\n"


def tool_round(n: int, size: int = 2000) -> list[LLMMessage]:
    call = ToolCall(id=f"call_{n}", name="read_file", arguments={"path": f"/src/module_{n}.py", "lines": [1, 200]})
    body = (CODE * (size // len(CODE) + 1))[:size]
    return [LLMMessage(role="assistant", content=None, tool_calls=[call.to_wire()]),
            LLMMessage(role="tool", content=body, tool_call_id=call.id)]


def transcript(messages: int) -> list[LLMMessage]:
    out = [LLMMessage(role="system", content="You are a careful agent."), LLMMessage(role="user", content=PROSE)]
    n = 0
    while len(out) < messages:
        out += tool_round(n)
        n += 1
    return out[:messages]


def drive(coro):
    """Run a coroutine that does not suspend; its return value."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("pre_step suspended: this benchmark measures the synchronous decision only")


def timed(fn, loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        fn()
    return (time.perf_counter() - start) / loops


def interleaved(ours, baseline, reps: int, loops: int) -> tuple[float, float]:
    a, b = [], []
    for rep in range(reps):
        pair = (ours, baseline) if rep % 2 == 0 else (baseline, ours)
        first, second = timed(pair[0], loops), timed(pair[1], loops)
        (a.append(first), b.append(second)) if rep % 2 == 0 else (b.append(first), a.append(second))
    return statistics.median(a), statistics.median(b)


def pressure_figure(reps: int, loops: int) -> dict:
    messages = transcript(2000) + tool_round(9999)
    hooks = CompactionHooks(1_000_000)  # well under threshold: the decision is "nothing to do"
    known = estimate_tokens(messages[:-2])
    ctx = LoopContext(chat_id="bench", round_index=7, last_prompt_tokens=known,
                      last_prompt_transcript_len=len(messages) - 2)
    threshold = hooks.threshold_tokens
    assert drive(hooks.pre_step(messages, ctx)) is None

    def ours():
        drive(hooks.pre_step(messages, ctx))

    async def appended_only(transcript, context):
        return context.last_prompt_tokens + estimate_tokens(transcript[context.last_prompt_transcript_len:]) > threshold

    def baseline():
        drive(appended_only(messages, ctx))

    def full():
        _ = estimate_tokens(messages) > threshold

    ours_s, base_s = interleaved(ours, baseline, reps, loops)
    full_s = statistics.median(timed(full, max(1, loops // 100)) for _ in range(max(3, reps // 3)))
    return {"figure": "pressure decision per round, 2,000-message transcript", "ours_us": ours_s * 1e6,
            "baseline_us": base_s * 1e6, "ratio": ours_s / base_s, "target": "<= 1.2x",
            "met": "yes" if ours_s / base_s <= 1.2 else "MISSED", "full_reestimate_us": full_s * 1e6,
            "messages": len(messages)}


def mixed_messages(total_chars: int = 1_000_000, count: int = 500) -> list[LLMMessage]:
    per = total_chars // count
    out = []
    for n in range(count):
        if n % 4 == 3:
            args = {"path": f"/src/{n}.py", "content": (CODE * (per // len(CODE) + 1))[:per - 60]}
            out.append(LLMMessage(role="assistant", content=None,
                                  tool_calls=[ToolCall(id=f"c{n}", name="write_file", arguments=args).to_wire()]))
        else:
            source = CJK if n % 4 == 1 else PROSE if n % 4 == 0 else CODE
            out.append(LLMMessage(role="user" if n % 2 else "assistant",
                                  content=(source * (per // len(source) + 1))[:per]))
    return out


def throughput_figure(reps: int) -> dict:
    messages = mixed_messages()
    chars = sum(len(m.content or "") + len(json.dumps(m.tool_calls or [])) for m in messages)
    runs = [timed(lambda: estimate_tokens(messages), 1) for _ in range(reps)]
    seconds = statistics.median(runs)
    return {"figure": "estimate_tokens on 1 MB of mixed text", "chars": chars, "messages": len(messages),
            "ms": seconds * 1e3, "mb_per_s": chars / seconds / 1e6, "tokens": estimate_tokens(messages)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--loops", type=int, default=2000, help="decisions per timed repetition")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    results = {"python": sys.version.split()[0], "rows": [pressure_figure(args.reps, args.loops),
                                                          throughput_figure(args.reps)]}
    p, t = results["rows"]
    print(f"{p['figure']}: ours {p['ours_us']:.2f} us, baseline (estimate the appended messages only) "
          f"{p['baseline_us']:.2f} us, ratio {p['ratio']:.2f}x (target {p['target']}: {p['met']}); "
          f"full re-estimate {p['full_reestimate_us']:.0f} us")
    print(f"{t['figure']}: {t['chars']:,} chars in {t['messages']} messages, {t['ms']:.1f} ms, "
          f"{t['mb_per_s']:.1f} M chars/s")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
