"""Loop overhead per round: CoreLoop against the same work done by hand, in one run, interleaved.

    .venv/bin/python bench/loop_bench.py [--turns 40] [--rounds 8] [--repeats 7] [--out results.json]

Every turn is ``rounds`` provider requests: ``rounds - 1`` responses calling one ``read`` tool, then
a text answer, from a zero-latency ScriptedProvider (explicit usage, messages not recorded, so the
provider costs next to nothing).

- memory: CoreLoop with InMemoryStorage (events, hooks, context, the record) vs a bare loop that
  streams the provider, dispatches through the ToolRouter and builds the same transcript (no
  record). Target <= 1.5x. Also, for context: CoreLoop without a storage against the bare loop
  (the loop's mechanics alone), and CoreLoop with InMemoryStorage against the bare loop plus the
  same ``append_history`` calls (the record's own cost taken out of the ratio).
- sqlite: CoreLoop with SqliteStorage vs the bare loop plus ``append_history`` of the same entries
  in the same calls (what the loop's flushes write: a fresh store each, synchronous=FULL). Target
  <= 1.3x.

Repetitions of ours and of the baseline alternate; the medians per round are compared. The memory
figures are CPU time of this process (``time.process_time``: the machine is shared, and this work
is pure CPU), the sqlite figures wall time (they wait for fsync).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "runtime"))

from steerable_agent_runtime import InMemoryStorage, SqliteStorage
from steerable_agent_runtime.llm import LLMUsage, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import CoreLoop
from steerable_agent_runtime.models import LLMMessage
from steerable_agent_runtime.tools import ToolRouter, tool

USAGE = LLMUsage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
USER = LLMMessage(role="user", content="look up the notes and summarise them")


def make_router() -> ToolRouter:
    router = ToolRouter()

    @tool(router=router, description="Read a note", mode="read")
    async def read_note(name: str) -> dict:
        return {"name": name, "text": "a short note"}

    return router


def script(rounds: int, turn: int) -> list[ScriptedResponse]:
    calls = [ScriptedResponse(text="checking", tool_calls=[{"id": f"c{turn}_{i}", "name": "read_note",
                                                             "arguments": {"name": f"n{i}"}}], usage=USAGE)
             for i in range(rounds - 1)]
    return [*calls, ScriptedResponse(text="here is the summary", usage=USAGE)]


async def loop_turns(storage_factory, router, turns: int, rounds: int, clock=time.process_time) -> float:
    """CoreLoop turns; ``storage_factory`` None: a loop without a record."""
    storage = storage_factory() if storage_factory else None
    started = clock()
    for turn in range(turns):
        loop = CoreLoop(ScriptedProvider(script(rounds, turn), record_messages=False), router, storage=storage)
        async for _ in loop.run([USER], chat_id=f"chat{turn}"):
            pass
    elapsed = clock() - started
    if storage is not None:
        await storage.close()
    return elapsed


async def bare_turns(storage_factory, router, turns: int, rounds: int, clock=time.process_time) -> float:
    """The same requests, dispatches and transcript by hand; with a storage, the same appends (the
    entries the loop's RecordWriter writes: items holding the LLMMessage instances)."""
    storage = storage_factory() if storage_factory else None
    started = clock()
    for turn in range(turns):
        provider = ScriptedProvider(script(rounds, turn), record_messages=False)
        transcript = [USER]
        record = f"chat{turn}"
        if storage is not None:
            await storage.append_history(record, [{"type": "item", "message": USER}])
        while True:
            text, calls = [], []
            async for chunk in provider.stream(transcript, tools=router.describe()):
                if chunk.content_delta:
                    text.append(chunk.content_delta)
                if chunk.tool_call is not None:
                    calls.append(chunk.tool_call)
            reply = LLMMessage(role="assistant", content="".join(text) or None,
                               tool_calls=[c.to_wire() for c in calls] or None)
            transcript.append(reply)
            if storage is not None:
                await storage.append_history(record, [{"type": "item", "message": reply}])
            if not calls:
                break
            results = [LLMMessage(role="tool", tool_call_id=c.id, name=c.name,
                                  content=(await router.dispatch(c)).to_content()) for c in calls]
            transcript.extend(results)
            if storage is not None:
                await storage.append_history(record, [{"type": "item", "message": m} for m in results])
    elapsed = clock() - started
    if storage is not None:
        await storage.close()
    return elapsed


def sqlite_factory(workdir: Path):
    counter = iter(range(10**9))

    def make():
        return SqliteStorage(workdir / f"bench-{next(counter)}.db")
    return make


def measure(args: argparse.Namespace) -> dict:
    router = make_router()
    workdir = Path(tempfile.mkdtemp(prefix="loop-bench-"))
    samples: dict[str, list[float]] = {k: [] for k in ("loop_memory", "loop_none", "bare", "bare_memory",
                                                      "loop_sqlite", "bare_sqlite")}
    try:
        for _ in range(args.repeats):
            samples["loop_memory"].append(asyncio.run(loop_turns(InMemoryStorage, router, args.turns, args.rounds)))
            samples["loop_none"].append(asyncio.run(loop_turns(None, router, args.turns, args.rounds)))
            samples["bare"].append(asyncio.run(bare_turns(None, router, args.turns, args.rounds)))
            samples["bare_memory"].append(asyncio.run(bare_turns(InMemoryStorage, router, args.turns, args.rounds)))
            samples["loop_sqlite"].append(asyncio.run(loop_turns(sqlite_factory(workdir), router, args.sqlite_turns,
                                                                 args.rounds, time.perf_counter)))
            samples["bare_sqlite"].append(asyncio.run(bare_turns(sqlite_factory(workdir), router, args.sqlite_turns,
                                                                 args.rounds, time.perf_counter)))
    finally:
        shutil.rmtree(workdir)
    per_round = {k: statistics.median(v) / ((args.turns if "sqlite" not in k else args.sqlite_turns) * args.rounds)
                 for k, v in samples.items()}
    return {
        "memory": {"ours_us_per_round": per_round["loop_memory"] * 1e6, "baseline_us_per_round": per_round["bare"] * 1e6,
                   "ratio": per_round["loop_memory"] / per_round["bare"], "target": 1.5},
        "no_storage": {"ours_us_per_round": per_round["loop_none"] * 1e6, "baseline_us_per_round": per_round["bare"] * 1e6,
                       "ratio": per_round["loop_none"] / per_round["bare"], "target": None},
        "memory_vs_appends": {"ours_us_per_round": per_round["loop_memory"] * 1e6,
                              "baseline_us_per_round": per_round["bare_memory"] * 1e6,
                              "ratio": per_round["loop_memory"] / per_round["bare_memory"], "target": None},
        "sqlite": {"ours_us_per_round": per_round["loop_sqlite"] * 1e6,
                   "baseline_us_per_round": per_round["bare_sqlite"] * 1e6,
                   "ratio": per_round["loop_sqlite"] / per_round["bare_sqlite"], "target": 1.3},
        "params": vars(args),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--sqlite-turns", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    load_before = os.getloadavg()
    result = measure(args)
    result["load_average"] = {"start": load_before, "end": os.getloadavg()}
    print(f"{'figure':<44} {'ours':>14} {'baseline':>14} {'ratio':>7} {'target':>8} {'met':>4}")
    for key, label in (("memory", "loop round, InMemoryStorage vs bare loop"),
                       ("no_storage", "loop round, no storage vs bare loop"),
                       ("memory_vs_appends", "loop round, InMemoryStorage vs bare + appends"),
                       ("sqlite", "loop round, SqliteStorage vs bare + appends")):
        row = result[key]
        target = "(context)" if row["target"] is None else f"<= {row['target']}x"
        met = "-" if row["target"] is None else ("yes" if row["ratio"] <= row["target"] else "no")
        print(f"{label:<44} {row['ours_us_per_round']:>11.1f} us {row['baseline_us_per_round']:>11.1f} us"
              f" {row['ratio']:>6.2f}x {target:>9} {met:>4}")
    print("load average (1, 5, 15 min): start {:.2f} {:.2f} {:.2f}, end {:.2f} {:.2f} {:.2f}".format(
        *result["load_average"]["start"], *result["load_average"]["end"]))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
