"""Loop overhead per round in CPU instructions (valgrind callgrind): a figure the machine's load does not move.

    .venv/bin/python bench/loop_instructions.py [--variants bare,none,memory] [--out results.json]

Variants: bare, none (CoreLoop without a storage), memory (with InMemoryStorage), bare_memory
(the bare loop plus the same appends), floor (the bare loop plus only the loop's events:
bench/loop_floor.py).

The same turns as bench/loop_bench.py (its functions, its defaults: 8 rounds a turn). Each variant
runs in its own ``valgrind --tool=callgrind --instr-atstart=no`` child, which switches the count on
(``callgrind_control -i on``) only around the measured turns; two children per variant, 5 and 15
turns, and the difference over 80 rounds is the instructions of a round (start-up, imports and the
event loop's creation cancel out). Needs valgrind; takes a few minutes. Instructions are not time
(the loop's wider code path runs at a lower rate per instruction), so this complements the timed
bench and does not replace it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 8
LOW, HIGH = 5, 15


def child(variant: str, turns: int) -> None:
    """Run ``turns`` turns of ``variant`` with callgrind counting only them."""
    sys.path.insert(0, str(ROOT / "bench"))
    import loop_bench as lb
    import loop_floor
    from steerable_agent_runtime import InMemoryStorage

    router = lb.make_router()
    run = {"memory": lambda: lb.loop_turns(InMemoryStorage, router, turns, ROUNDS),
           "none": lambda: lb.loop_turns(None, router, turns, ROUNDS),
           "bare": lambda: lb.bare_turns(None, router, turns, ROUNDS),
           "bare_memory": lambda: lb.bare_turns(InMemoryStorage, router, turns, ROUNDS),
           "floor": lambda: loop_floor.floor_turns(router, turns, ROUNDS)}[variant]
    asyncio.run(lb.loop_turns(InMemoryStorage, router, 2, ROUNDS))  # warm: every code path imported and run once
    asyncio.run(lb.bare_turns(InMemoryStorage, router, 2, ROUNDS))
    asyncio.run(loop_floor.floor_turns(router, 2, ROUNDS))
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL, check=True)
    asyncio.run(run())
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], stdout=subprocess.DEVNULL, check=True)


def count(variant: str, turns: int) -> int:
    done = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                           sys.executable, __file__, "--child", variant, str(turns)],
                          capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind for {variant}: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="bare,none,memory")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "TURNS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    per_round = {v: (count(v, HIGH) - count(v, LOW)) / ((HIGH - LOW) * ROUNDS) for v in args.variants.split(",")}
    base = per_round.get("bare")
    for variant, instructions in per_round.items():
        ratio = f"{instructions / base:.2f}x bare" if base else ""
        print(f"{variant:<12} {instructions:>10,.0f} instructions/round  {ratio}")
    if args.out:
        args.out.write_text(json.dumps({"instructions_per_round": per_round}, indent=2))


if __name__ == "__main__":
    main()
