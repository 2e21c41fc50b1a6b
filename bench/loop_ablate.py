"""Where a loop round's time goes: CoreLoop (InMemoryStorage) with one piece removed, in one process.

    .venv/bin/python bench/loop_ablate.py [--repeats 25] [--turns 40]

A measuring tool, not a figure: every variant but ``base`` / ``base2`` breaks the loop's
behaviour on purpose (a piece left out, or replaced by a cheaper stand-in), to see what that
piece costs where it runs. The variants' repetitions alternate; printed are the median CPU time
per round (``time.process_time``) and its difference to ``base``. ``base2`` (the same code as
``base``) and ``recompiled`` (the code of rounds.turn_events / ToolBatch.single compiled again
from its source, unchanged) show the noise. The same turns as bench/loop_bench.py.

Warm micro-benchmarks mislead here: a C call that takes 300 ns in a ``timeit`` loop costs about
1 us inside a round (its code is cold there), and the loop's bytecode runs at a lower rate than
the bare loop's C-heavy code (more of the interpreter's indirect jumps mispredicted:
``valgrind --tool=callgrind --branch-sim=yes``). So the pieces are measured in place.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import statistics
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loop_bench as lb  # noqa: E402 - after the path (it puts the runtime on sys.path)
from steerable_agent_runtime import InMemoryStorage  # noqa: E402
from steerable_agent_runtime import history_append  # noqa: E402
from steerable_agent_runtime.loop import core, rounds, toolbatch  # noqa: E402
from steerable_agent_runtime.loop.events import LoopEvent  # noqa: E402
from steerable_agent_runtime.storage import memory  # noqa: E402

_new = object.__new__


def edited(function, module, edits: list[tuple[str, str]]):
    """``function`` compiled again from its source with ``edits`` (old, new) applied, in ``module``'s globals."""
    source = textwrap.dedent(inspect.getsource(function))
    for old, new in edits:
        if old not in source:
            raise SystemExit(f"edit does not apply (the source changed?): {old!r}")
        source = source.replace(old, new)
    names: dict = {}
    exec(compile("from __future__ import annotations\n" + source, module.__file__, "exec"), dict(module.__dict__), names)
    return names[function.__name__]


def single_minimal(self, call, ctx, run, results):
    """ToolBatch.single without its guards, dedup, clock, rounding and error streak (the bench's call only)."""
    pending = self._dispatch(call, consent_granted=False, context=ctx)
    try:
        pending.send(None)
    except StopIteration as done:
        result = done.value
    results.append((call, result))
    event = _new(LoopEvent)
    event.kind = "tool_call_result"
    event.data = {"id": call.id, "name": call.name, "success": True, "durationMs": 0.0}
    return event


def variants() -> dict[str, list[tuple[object, str, object]]]:
    """name -> the (object, attribute, value) patches it applies."""
    single, turn_events = toolbatch.ToolBatch.single, rounds.turn_events

    def in_single(*edits):
        return [(toolbatch.ToolBatch, "single", edited(single, toolbatch, list(edits)))]

    def in_round(*edits):
        return [(core, "turn_events", edited(turn_events, rounds, list(edits)))]

    return {
        "base": [],
        "recompiled": in_round() + in_single(),
        "record: no append_built_now": [(memory.InMemoryStorage, "append_built_now", lambda self, *a: True)],
        "record: no calls JSON": [(history_append, "_dump_calls_json", lambda calls: b"[]")],
        "single: minimal": [(toolbatch.ToolBatch, "single", single_minimal)],
        "single: no mode check": in_single(("or (mode_of is not None and mode_of(call.name) in CONSENT_MODES)", "")),
        "single: no dedup": in_single(("if self._dedup:", "if False:")),
        "single: no clock": in_single(("started = _perf_counter()", "started = 0.0"),
                                      ("ms = (_perf_counter() - started) * 1000.0", "ms = 0.0")),
        "single: no rounding": in_single(("round(ms * 1000.0) / 1000.0}", "ms}")),
        "round: stage_start not yielded": in_round(('event.data = {"round": rnd}\n' + ' ' * 20 + 'yield event',
                                                    'event.data = {"round": rnd}')),
        "round: no transcript copy": in_round(("provider.stream(list(transcript), tools=described, cancel=signal)",
                                               "provider.stream(transcript, tools=described, cancel=signal)")),
        "round: no describe()": in_round(("described = tools.describe() or None", "described = None")),
        "base2": [],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--turns", type=int, default=40)
    args = parser.parse_args()
    router = lb.make_router()
    table = variants()
    samples: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(args.repeats):
        for name, patches in table.items():
            saved = [(target, attribute, getattr(target, attribute)) for target, attribute, _ in patches]
            for target, attribute, value in patches:
                setattr(target, attribute, value)
            try:
                elapsed = asyncio.run(lb.loop_turns(InMemoryStorage, router, args.turns, 8, time.process_time))
            finally:
                for target, attribute, value in saved:
                    setattr(target, attribute, value)
            samples[name].append(elapsed / (args.turns * 8) * 1e6)
    base = statistics.median(samples["base"])
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<34} {median:7.2f} us/round  {median - base:+6.2f}")


if __name__ == "__main__":
    main()
