"""CPU per history row of check's batched row loop, by the kind of the message's content.

The runtime writes an assistant turn that only calls tools with ``content: null``
(llm/types.py) and a multimodal message with a list of parts; the bench stores hold text
content only. This measures check's history loop (rows.py ``_history_batches``, what a full
check runs per batch after the fetch) on 100,000 generated rows of each kind (an assistant
message with one tool call, a valid checksum), as CPU time per row, best of ``--reps``.

``--before RUNTIME`` (the ``runtime`` directory of another checkout, e.g. a ``git worktree``
of an older main) runs the same loop from that tree too: each round runs one child process
per tree, in alternating order, and the table gives each tree's best per kind.

Usage (repository root)::

    .venv/bin/python bench/check_content_kinds.py [--rounds 3] [--reps 5] [--before /tmp/old/runtime]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROWS = 100_000
KINDS = {"text": "I will read the file first.", "null": None,
         "parts": [{"type": "text", "text": "I will read the file first."}]}
AT = "2026-05-30T23:34:04.800621Z"


def _batches(content: object, checksum: object) -> list[list[tuple]]:
    rows = []
    for i in range(ROWS):
        record_id, seq = f"chat-{i // 500:05d}", i % 500 + 1
        message = {"role": "assistant", "content": content,
                   "toolCalls": [{"id": f"call_{seq}", "name": "read_file", "arguments": {"path": "src/app.py"}}]}
        data = json.dumps({"v": 2, "type": "item", "seq": seq, "at": AT, "message": message},
                          separators=(",", ":")).encode()
        rows.append((record_id, seq, 2, "item", AT, data, checksum.row_crc("history", (record_id, seq), data)))
    return [rows[i:i + 128] for i in range(0, ROWS, 128)]


def child(runtime: str, reps: int) -> dict[str, float]:
    """Best CPU microseconds per row of each kind, with the check code of ``runtime``."""
    sys.path.insert(0, runtime)
    from steerable_agent_runtime.maintenance.check import rows
    from steerable_agent_runtime.maintenance.codes import FindingLog
    from steerable_agent_runtime.storage import checksum

    best = {}
    for kind, content in KINDS.items():
        batches = _batches(content, checksum)
        times = []
        for _ in range(reps):
            log, stats = FindingLog(20), rows.RecordStats()
            start = time.process_time()
            rows._history_batches(batches, checksum.batch_checker("history", 2, (0, 1), 5, 6), log, stats,
                                  lambda n: None)
            times.append(time.process_time() - start)
            if log.counts:
                raise SystemExit(f"{kind}: the generated rows have findings: {log.counts}")
        best[kind] = min(times) / ROWS * 1e6
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--before", help="the runtime directory of another checkout")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.reps)))
        return
    # (imported here, not at the top: harness loads this tree's runtime, and a child must
    # import only the runtime of its own tree)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from harness import trees_side_by_side

    results = trees_side_by_side(__file__, args.before, args.rounds, ["--reps", str(args.reps)])
    print("| tree | " + " | ".join(f"{kind} content, us/row" for kind in KINDS) + " | null / text | parts / text |")
    print("|---|" + "---|" * (len(KINDS) + 2))
    for name, runs in results.items():
        best = {kind: min(run[kind] for run in runs) for kind in KINDS}
        print(f"| {name} | " + " | ".join(f"{best[kind]:.3f}" for kind in KINDS)
              + f" | {best['null'] / best['text']:.2f}x | {best['parts'] / best['text']:.2f}x |")


if __name__ == "__main__":
    main()
