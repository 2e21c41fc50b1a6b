"""Instructions (callgrind) of ``storage/sqlite_append.plain_rows`` alone, per batch of 50, for
the append figure's text and for kinds of text that need escaping, for the runtime of any checkout.

    .venv/bin/python bench/append_text_kinds.py [TREE ...] [--batches 100]

Each TREE (default: this repository) is a checkout whose ``runtime/`` is imported (e.g. an
unpacked ``git archive`` of an older commit), so before and after are compared in one run. The
batch is the figure's (bench/figures_core.py: 50 items of the generator's ASCII text, one ``at``),
then the same with: a newline added to every third content (``newline/3``), a newline in the last
one only, a quote ``"q"`` in every content, a tab in the last one, non-ASCII text (`` é ✓``) in
every content. Only the measured loop is collected (``--toggle-collect`` on the C iterator that
drives it); the count includes freeing the previous batch's rows and dicts. Needs valgrind.
"""

from __future__ import annotations

import argparse
import collections
import os
import itertools
import random
import sys
from pathlib import Path

KINDS = ("figure", "newline/3", "newline last", "quote all", "tab last", "non-ASCII all")


def child(tree: Path, kind: str, batches: int) -> None:
    sys.path[:0] = [str(tree / "runtime"), str(Path(__file__).resolve().parent)]
    import make_store
    from steerable_agent_runtime.storage.sqlite_append import plain_rows

    text = make_store.TextSource(random.Random(50))
    batch = [{"type": "item", "at": "2026-05-01T00:00:00.000000Z",
              "message": {"role": ("user", "assistant")[i % 2], "content": text.text(text.length())}}
             for i in range(50)]
    changed = {"newline/3": (batch[::3], "\nok"), "newline last": (batch[-1:], "\nok"), "quote all": (batch, ' "q"'),
               "tab last": (batch[-1:], "\tok"), "non-ASCII all": (batch, " é ✓")}.get(kind, ([], ""))
    for entry in changed[0]:
        entry["message"]["content"] += changed[1]

    def one() -> object:
        return plain_rows("r1", batch, 1000)

    for _ in range(20):  # warm-up, not collected
        one()
    collections.deque(itertools.starmap(one, [()] * batches), maxlen=0)


def count(tree: Path, kind: str, batches: int) -> int:
    from append_instructions import per_batch  # (bench/ is on sys.path: this script's folder)

    return per_batch(__file__, tree, kind, batches, env={**os.environ, "PYTHONHASHSEED": "0"})


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, default=[Path(__file__).resolve().parents[1]])
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    print("| text of the batch | " + " | ".join(str(tree) for tree in args.trees) + " |")
    print("|---|" + "---|" * len(args.trees))
    for kind in KINDS:
        counts = [count(tree.resolve(), kind, args.batches) for tree in args.trees]
        print(f"| {kind} | " + " | ".join(f"{c:,}" for c in counts) + " |")


if __name__ == "__main__":
    main()
