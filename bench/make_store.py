"""Deterministic benchmark stores, written through the public SqliteStorage API.

``make_store(path, chats, entries, seed=...)`` writes ``chats`` chats, each with a history
record of ``entries`` entries (user, assistant and tool items of 50 to 2,000 characters, a
compaction boundary every ~200 entries), one chat message per history item (the
user-visible copy, which ``search_sessions`` finds), two sessions, and traces with llm/tool/
approval spans and events. The same arguments give the same logical content (fixed ids,
fixed base time, seeded random), so every benchmark run measures the same data.

Time layout (what the write jobs act on): even-numbered chats are *old* (every session
inactive, everything written 120 to 360 days before BASE_TIME); odd-numbered chats are
*recent* (the last session active, everything written in the 10 days before BASE_TIME).
``CUTOFF`` (BASE_TIME - 100 days) splits them, so an archive or a compact at ``CUTOFF``
acts on exactly half the chats and half the traces.

Size: the default 2,000 x 500 store is 1.6 GiB and takes about 11 minutes on a 2-core VM:
the history record alone is about 0.5 GB (entries average ~460 bytes of JSON); the other
~1.1 GB are the 996,000 chat messages (one per history item), their indexes and the FTS5
full-text index that search needs.

Usage:
    python bench/make_store.py OUT.db                 # 2,000 x 500: a million entries
    python bench/make_store.py OUT.db --small         # 50 x 400: seconds
    python bench/make_store.py OUT.db --chats 200 --entries 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from steerable_agent_runtime import (AgentSession, ChatMessage, HarnessTrace, SqliteStorage, TraceEvent,
                                     TraceSpan)

BASE_TIME = datetime(2026, 6, 1, tzinfo=timezone.utc)
CUTOFF = BASE_TIME - timedelta(days=100)
"""Old chats and traces are all before it, recent ones all after it."""
DEFAULT_CHATS, DEFAULT_ENTRIES = 2000, 500
SMALL_CHATS, SMALL_ENTRIES = 50, 400
TRACES_PER_CHAT = 4
BOUNDARY_EVERY = 200
GENERATOR_VERSION = 3  # 3: schema 2 (checksums bind the key columns)
"""Bump when the content changes, so cached stores are rebuilt."""

_TOOLS = ("search_docs", "read_file", "run_sql", "http_get", "send_email", "calendar_lookup")


def iso(moment: datetime) -> str:
    """A normalised UTC timestamp (the storage's own format)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TextSource:
    """Pseudo-English text with a Zipf word distribution, so full-text search sees
    realistic selectivity (a few very common words, a long tail of rare ones)."""

    def __init__(self, rng: random.Random, words: int = 6000) -> None:
        syllables = ["ka", "lo", "mi", "ne", "ra", "to", "su", "vi", "de", "po", "gan", "ter", "lin",
                     "mar", "sol", "ben", "cor", "fil", "dus", "ny", "qua", "zer", "hob", "wix"]
        vocab: list[str] = []
        seen: set[str] = set()
        while len(vocab) < words:
            word = "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
            if word not in seen:
                seen.add(word)
                vocab.append(word)
        self.vocab = vocab
        weights = [1.0 / (rank ** 1.07) for rank in range(1, words + 1)]
        total, acc, cum = sum(weights), 0.0, []
        for w in weights:
            acc += w
            cum.append(acc / total)
        self._cum = cum
        self._rng = rng

    def length(self) -> int:
        """A message length in characters: log-normal (median ~230), clipped to 50..2,000."""
        return int(min(2000, max(50, self._rng.lognormvariate(math.log(230), 0.9))))

    def text(self, chars: int) -> str:
        words = self._rng.choices(self.vocab, cum_weights=self._cum, k=chars // 5 + 2)
        out = " ".join(words)
        while len(out) < chars:
            out += " " + " ".join(self._rng.choices(self.vocab, cum_weights=self._cum, k=chars // 5 + 2))
        return out[:chars].rstrip() + "."

    def query_words(self, count: int, seed: int) -> list[str]:
        """``count`` search queries: words (and some two-word AND queries) drawn
        log-uniformly from vocabulary ranks 100..words, i.e. specific terms a user types."""
        rng = random.Random(seed)
        top = len(self.vocab)
        queries = []
        for i in range(count):
            rank = int(math.exp(rng.uniform(math.log(100), math.log(top - 1))))
            query = self.vocab[rank]
            if i % 4 == 3:
                query += " " + self.vocab[int(math.exp(rng.uniform(math.log(20), math.log(400))))]
            queries.append(query)
        return queries


@dataclass
class StoreInfo:
    """What was written, and the knobs the benchmarks need to act on it."""

    path: str
    chats: int
    entries: int
    seed: int
    history_rows: int = 0
    messages: int = 0
    sessions: int = 0
    traces: int = 0
    spans: int = 0
    events: int = 0
    old_chats: int = 0
    old_traces: int = 0
    cutoff: str = iso(CUTOFF)
    base_time: str = iso(BASE_TIME)
    bytes: int = 0
    seconds: float = 0.0
    generator_version: int = GENERATOR_VERSION
    queries: list[str] = field(default_factory=list)


def chat_id(i: int) -> str:
    return f"chat-{i:05d}"


def is_old(i: int) -> bool:
    return i % 2 == 0


class _Chat:
    """Generates one chat's content in time order."""

    def __init__(self, i: int, rng: random.Random, text: TextSource, entries: int) -> None:
        self.i, self.rng, self.text, self.entries = i, rng, text, entries
        self.chat_id, self.user_id = chat_id(i), f"user-{i % 97:03d}"
        if is_old(i):
            self.start = BASE_TIME - timedelta(days=360 - rng.uniform(0, 200))
            span = timedelta(days=30)
        else:
            self.start = BASE_TIME - timedelta(days=10)
            span = timedelta(days=9)
        self.step = span / max(entries, 1)
        self.end = self.start + self.step * entries

    def at(self, j: int) -> datetime:
        return self.start + self.step * j + timedelta(microseconds=self.rng.randint(0, 999))

    def history_and_messages(self) -> tuple[list[dict[str, Any]], list[ChatMessage]]:
        entries: list[dict[str, Any]] = []
        messages: list[ChatMessage] = []
        next_boundary = BOUNDARY_EVERY + self.rng.randint(-20, 20)
        state, call_id = "user", ""
        for j in range(self.entries):
            at = iso(self.at(j))
            if j == next_boundary:
                next_boundary += BOUNDARY_EVERY + self.rng.randint(-20, 20)
                entries.append(self._boundary(at))
                continue
            msg: dict[str, Any]
            if state == "user":
                msg, state = {"role": "user", "content": self.text.text(self.text.length())}, "assistant"
            elif state == "assistant" and self.rng.random() < 0.35:
                call_id = f"call-{self.i}-{j}"
                tool = self.rng.choice(_TOOLS)
                args = json.dumps({"query": self.text.text(self.rng.randint(20, 120))})
                msg = {"role": "assistant", "content": self.text.text(self.rng.randint(50, 200)),
                       "toolCalls": [{"id": call_id, "type": "function",
                                      "function": {"name": tool, "arguments": args}}]}
                state = "tool"
            elif state == "tool":
                body = json.dumps({"status": "ok", "result": self.text.text(max(20, self.text.length() - 40))})
                msg = {"role": "tool", "content": body, "toolCallId": call_id, "name": "tool"}
                state = "assistant"
            else:
                msg, state = {"role": "assistant", "content": self.text.text(self.text.length())}, "user"
            entries.append({"type": "item", "at": at, "message": msg})
            messages.append(ChatMessage(id=f"{self.chat_id}-m{j:05d}", chat_id=self.chat_id, role=msg["role"],
                                        content=msg["content"], created_at=at))
        return entries, messages

    def _boundary(self, at: str) -> dict[str, Any]:
        pre = self.rng.randint(90_000, 180_000)
        summary = "Summary of the conversation so far: " + self.text.text(self.rng.randint(400, 1500))
        return {"type": "compaction_boundary", "at": at, "trigger": "pressure", "preTokens": pre,
                "postTokens": pre // 10,
                "replacement": [{"role": "user", "content": summary},
                                {"role": "assistant", "content": self.text.text(self.rng.randint(50, 300))}]}

    def sessions(self) -> list[AgentSession]:
        mid = self.start + (self.end - self.start) / 2
        recent = not is_old(self.i)
        return [
            AgentSession(session_id=f"{self.chat_id}-s0", user_id=self.user_id, chat_id=self.chat_id,
                         current_stage="done", is_active=False, created_at=iso(self.start), updated_at=iso(mid),
                         scenario="support", stage_data={"step": 7}),
            AgentSession(session_id=f"{self.chat_id}-s1", user_id=self.user_id, chat_id=self.chat_id,
                         current_stage="answering" if recent else "done", is_active=recent,
                         created_at=iso(mid), updated_at=iso(self.end), scenario="support",
                         stage_data={"step": 3}),
        ]

    def traces(self) -> list[tuple[HarnessTrace, list[TraceSpan], list[TraceEvent]]]:
        out = []
        for k in range(TRACES_PER_CHAT):
            trace_id = f"{self.chat_id}-t{k}"
            t0 = self.start + (self.end - self.start) * (k / TRACES_PER_CHAT)
            session = f"{self.chat_id}-s{0 if k < TRACES_PER_CHAT // 2 else 1}"
            trace = HarnessTrace(trace_id=trace_id, session_id=session, chat_id=self.chat_id,
                                 user_id=self.user_id, started_at=iso(t0),
                                 ended_at=iso(t0 + timedelta(seconds=40)), outcome="ok")
            spans, events = [], []
            for n in range(self.rng.randint(2, 5)):
                s0 = t0 + timedelta(seconds=8 * n)
                llm = TraceSpan(span_id=f"{trace_id}-llm{n}", name="llm.request", kind="llm", start_at=iso(s0),
                                end_at=iso(s0 + timedelta(seconds=3)),
                                attrs={"model": "gpt-x", "inputTokens": self.rng.randint(500, 90_000),
                                       "outputTokens": self.rng.randint(20, 2000)})
                spans.append(llm)
                events.append(TraceEvent(event_id=f"{llm.span_id}-e0", span_id=llm.span_id, name="first_token",
                                         at=iso(s0 + timedelta(seconds=1))))
                if self.rng.random() < 0.5:
                    tool = TraceSpan(span_id=f"{trace_id}-tool{n}", name=self.rng.choice(_TOOLS), kind="tool",
                                     start_at=iso(s0 + timedelta(seconds=3)), end_at=iso(s0 + timedelta(seconds=6)),
                                     attrs={"args": self.text.text(60)})
                    spans.append(tool)
                    if self.rng.random() < 0.3:
                        spans.append(TraceSpan(span_id=f"{trace_id}-appr{n}", name="approval.wait", kind="approval",
                                               parent_id=tool.span_id, start_at=iso(s0 + timedelta(seconds=3)),
                                               end_at=iso(s0 + timedelta(seconds=5))))
                        events.append(TraceEvent(event_id=f"{trace_id}-appr{n}-e0", span_id=f"{trace_id}-appr{n}",
                                                 name="approved", at=iso(s0 + timedelta(seconds=5)),
                                                 attrs={"by": self.user_id}))
            out.append((trace, spans, events))
        return out


async def _write(path: Path, chats: int, entries: int, seed: int, batch: int,
                 progress: Callable[[int, int], None] | None) -> StoreInfo:
    rng = random.Random(seed)
    text = TextSource(random.Random(seed + 1))
    info = StoreInfo(path=str(path), chats=chats, entries=entries, seed=seed)
    storage = SqliteStorage(path, synchronous="NORMAL")
    try:
        for i in range(chats):
            chat = _Chat(i, rng, text, entries)
            for session in chat.sessions():
                await storage.upsert_session(session)
            history, messages = chat.history_and_messages()
            for start in range(0, len(history), batch):
                await storage.append_history(chat.chat_id, history[start:start + batch])
            for message in messages:
                await storage.append_message(message)
            for trace, spans, events in chat.traces():
                await storage.upsert_trace(trace)
                for span in spans:
                    await storage.add_span(trace.trace_id, span)
                for event in events:
                    await storage.add_event(trace.trace_id, event)
                info.spans += len(spans)
                info.events += len(events)
                info.old_traces += trace.started_at < info.cutoff
            info.history_rows += len(history)
            info.messages += len(messages)
            info.sessions += 2
            info.traces += TRACES_PER_CHAT
            info.old_chats += is_old(i)
            if progress:
                progress(i + 1, chats)
        storage.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await storage.close()
    info.queries = text.query_words(100, seed + 2)
    return info


def make_store(path: str | Path, chats: int = DEFAULT_CHATS, entries: int = DEFAULT_ENTRIES, *, seed: int = 1,
               batch: int = 500, progress: Callable[[int, int], None] | None = None) -> StoreInfo:
    """Write a benchmark store at ``path`` (which must not exist) and return what it holds.

    Deterministic in (chats, entries, seed): fixed ids, times relative to BASE_TIME, seeded
    random. Writes through SqliteStorage with synchronous=NORMAL and ``batch``-entry appends
    for speed; the WAL is checkpointed at the end so the store is one self-contained file.
    Raises FileExistsError when ``path`` exists.
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; benchmark stores are only written fresh")
    started = time.perf_counter()
    info = asyncio.run(_write(path, chats, entries, seed, batch, progress))
    info.seconds = round(time.perf_counter() - started, 2)
    info.bytes = path.stat().st_size
    return info


def cached_store(directory: str | Path, chats: int, entries: int, *, seed: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> StoreInfo:
    """The store for (chats, entries, seed) in ``directory``, generated on first use.

    A ``.json`` sidecar written after a complete generation marks the store as usable; a
    store without it (an interrupted run) is deleted and regenerated.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / f"store-{chats}x{entries}-s{seed}-g{GENERATOR_VERSION}.db"
    meta = db.with_suffix(".json")
    if db.exists() and meta.exists():
        # The recorded path is where it was generated; the cache may have been moved or
        # passed as --work from another checkout, so the path is always the one found here.
        return StoreInfo(**{**json.loads(meta.read_text()), "path": str(db)})
    for stale in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), db.with_suffix(".lock"), meta):
        stale.unlink(missing_ok=True)
    info = make_store(db, chats, entries, seed=seed, progress=progress)
    meta.write_text(json.dumps(asdict(info), indent=1))
    return info


def _print_progress(done: int, total: int) -> None:
    if done == total or done % max(1, total // 20) == 0:
        print(f"  {done}/{total} chats", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="path of the new store (must not exist)")
    parser.add_argument("--small", action="store_true", help=f"{SMALL_CHATS} chats x {SMALL_ENTRIES} entries")
    parser.add_argument("--chats", type=int, help=f"number of chats (default {DEFAULT_CHATS})")
    parser.add_argument("--entries", type=int, help=f"history entries per chat (default {DEFAULT_ENTRIES})")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    chats = args.chats or (SMALL_CHATS if args.small else DEFAULT_CHATS)
    entries = args.entries or (SMALL_ENTRIES if args.small else DEFAULT_ENTRIES)
    try:
        info = make_store(args.out, chats, entries, seed=args.seed, progress=_print_progress)
    except FileExistsError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    summary = {k: v for k, v in asdict(info).items() if k != "queries"}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
