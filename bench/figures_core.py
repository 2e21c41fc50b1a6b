"""Runtime-core figures: append throughput, resume cost vs prefix length, search latency.

Each function takes the run Settings and returns table Rows; baselines run in the same
process on the same data, interleaved with ours (harness.interleave).
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import make_store
from harness import (Row, Settings, fmt_rate, fmt_seconds, interleave, log, median, percentile, profiled,
                     remove_store, timed, verdict)

from steerable_agent_runtime import SqliteStorage, resume_transcript
from steerable_agent_runtime.history_append import prepare_append
from steerable_agent_runtime.storage.checksum import row_crc
from steerable_agent_runtime.storage.schema import create_schema

APPEND_TARGET = 1.3
RESUME_TARGET = 1.5
SEARCH_P50_TARGET_MS = 2.0
SEARCH_P95_TARGET_MS = 5.0


_LOOP = asyncio.new_event_loop()


def awaited(coro: Any) -> tuple[float, Any]:
    """Seconds the awaited call took (timed inside the loop, so loop start-up is not
    counted), and its result. One event loop serves the whole run."""
    async def timed_call() -> tuple[float, Any]:
        started = time.perf_counter()
        result = await coro
        return time.perf_counter() - started, result
    return _LOOP.run_until_complete(timed_call())


def _items(count: int, seed: int, start_at: str = "2026-05-01T00:00:00.000000Z") -> list[dict[str, Any]]:
    """``count`` history items with the generator's text mix (user/assistant alternating)."""
    text = make_store.TextSource(random.Random(seed))
    roles = ("user", "assistant")
    return [{"type": "item", "at": start_at, "message": {"role": roles[i % 2], "content": text.text(text.length())}}
            for i in range(count)]


# append ------------------------------------------------------------------------------
def append_rows(settings: Settings) -> list[Row]:
    """append_history in batches of 1 and 50 vs executemany of the same rows, same schema
    and pragmas (WAL, synchronous=FULL: the storage default), one transaction per batch."""
    rows = []
    for batch, count in sorted(settings.append_entries.items()):
        rows.append(_append_figure(settings, batch, count))
    return rows


def _append_figure(settings: Settings, batch: int, count: int) -> Row:
    entries = _items(count, seed=batch)
    ours_db, base_db = settings.scratch / f"append{batch}-ours.db", settings.scratch / f"append{batch}-base.db"
    for db in (ours_db, base_db):
        remove_store(db)
    storage = SqliteStorage(ours_db)  # synchronous=FULL, the default every app gets
    base = baseline_conn(base_db)
    cpu: dict[str, list[float]] = {"ours": [], "baseline": []}  # process CPU seconds per repetition
    try:
        def ours(rep: int) -> float:
            record = f"ours-{rep}"
            run = lambda: awaited(_append_all(storage, record, entries, batch))[0]  # noqa: E731
            started = time.process_time()
            seconds = profiled(settings, f"append{batch}", run) if rep == 0 else run()
            cpu["ours"].append(time.process_time() - started)
            return seconds

        def baseline(rep: int) -> float:
            prepared = prepare_append(f"base-{rep}", entries, 1)
            tuples = [(f"base-{rep}", p.seq, p.v, p.type, p.at, p.data, row_crc("history", (f"base-{rep}", p.seq), p.data))
                      for p in prepared]
            started = time.process_time()
            seconds, _ = timed(lambda: _executemany_all(base, tuples, batch))
            cpu["baseline"].append(time.process_time() - started)
            return seconds

        mine, theirs = interleave(settings.reps, ours, baseline)
        stored = storage.conn.execute("SELECT count(*) FROM history").fetchone()[0]
        stored_base = base.execute("SELECT count(*) FROM history").fetchone()[0]
    finally:
        storage.close_sync()
        base.close()
        for db in (ours_db, base_db):
            remove_store(db)
    if stored != count * settings.reps or stored_base != count * settings.reps:
        raise RuntimeError(f"append batch {batch}: stored {stored}/{stored_base} rows, expected {count * settings.reps}")
    ours_rate, base_rate = count / median(mine), count / median(theirs)
    ratio = base_rate / ours_rate  # how many times slower than raw executemany
    gated = batch == 50
    # CPU per batch (the part a fsync's latency does not move): ours, the baseline's, and what ours adds
    batches = -(-count // batch)
    cpu_ours, cpu_base = median(cpu["ours"]) / batches, median(cpu["baseline"]) / batches
    return Row(figure=f"append entries/s, batches of {batch}", ours=fmt_rate(ours_rate),
               baseline=fmt_rate(base_rate) + " executemany", ratio=ratio,
               target=f"<= {APPEND_TARGET:g}x slower" if gated else "(context)",
               met=verdict(ratio <= APPEND_TARGET) if gated else "n/a",
               note=(f"{count} entries x {settings.reps} reps, synchronous=FULL; ratio = baseline rate / ours;"
                     f" CPU per batch {cpu_ours * 1e6:,.0f} us vs {cpu_base * 1e6:,.0f} us"
                     f" ({cpu_ours / cpu_base:.2f}x, +{(cpu_ours - cpu_base) * 1e6:,.0f} us)"),
               raw={"ours_per_s": ours_rate, "baseline_per_s": base_rate, "ours_s": mine, "baseline_s": theirs,
                    "ours_cpu_s": cpu["ours"], "baseline_cpu_s": cpu["baseline"],
                    "cpu_per_batch_us": {"ours": cpu_ours * 1e6, "baseline": cpu_base * 1e6}})


async def _append_all(storage: SqliteStorage, record: str, entries: list[dict[str, Any]], batch: int) -> None:
    for start in range(0, len(entries), batch):
        await storage.append_history(record, entries[start:start + batch])


def baseline_conn(path: Path, synchronous: str = "FULL") -> sqlite3.Connection:
    """An equivalent table: the store's own DDL, WAL, ``synchronous`` (FULL: the storage
    default), autocommit."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    create_schema(conn)
    return conn


def _executemany_all(conn: sqlite3.Connection, rows: list[tuple[Any, ...]], batch: int) -> None:
    sql = "INSERT INTO history (record_id, seq, v, type, at, data, crc) VALUES (?, ?, ?, ?, ?, ?, ?)"
    for start in range(0, len(rows), batch):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(sql, rows[start:start + batch])
        conn.execute("COMMIT")


# resume ------------------------------------------------------------------------------
TAIL = 100


def resume_store(settings: Settings) -> Path:
    """A store with record ``long`` (``resume_prefix`` items, then a compaction boundary and
    99 items) and record ``short`` (100 items): both resumes read 100 entries."""
    directory = settings.work / "stores"
    directory.mkdir(parents=True, exist_ok=True)
    db = directory / f"resume-{settings.resume_prefix}-g{make_store.GENERATOR_VERSION}.db"
    done = db.with_suffix(".done")
    if db.exists() and done.exists():
        return db
    remove_store(db)
    awaited(_write_resume_store(db, settings.resume_prefix))
    done.write_text("ok\n")
    return db


async def _write_resume_store(db: Path, prefix: int) -> None:
    storage = SqliteStorage(db, synchronous="NORMAL")
    try:
        chunk = 2000
        for start in range(0, prefix, chunk):
            await storage.append_history("long", _items(min(chunk, prefix - start), seed=start))
            if start % 100_000 == 0:
                log(f"  resume store: {start}/{prefix} prefix entries")
        boundary = {"type": "compaction_boundary", "trigger": "pressure", "preTokens": 150_000, "postTokens": 12_000,
                    "replacement": [{"role": "user", "content": "Summary so far: " + "x" * 800},
                                    {"role": "assistant", "content": "Understood."}]}
        await storage.append_history("long", [boundary, *_items(TAIL - 1, seed=-1)])
        await storage.append_history("short", _items(TAIL, seed=-2))
        storage.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await storage.close()


def resume_rows(settings: Settings) -> list[Row]:
    db = resume_store(settings)
    storage = SqliteStorage(db)
    try:
        lengths = {}

        def side(record: str):
            def run(rep: int) -> float:
                seconds, transcript = awaited(resume_transcript(storage, record))
                lengths[record] = len(transcript)
                return seconds
            return run

        reps = max(15, settings.reps * 5)
        profiled(settings, "resume", lambda: awaited(resume_transcript(storage, "long")))
        mine, theirs = interleave(reps, side("long"), side("short"))
    finally:
        storage.close_sync()
    if lengths != {"long": 2 + TAIL - 1, "short": TAIL}:
        raise RuntimeError(f"resume returned unexpected transcripts: {lengths}")
    ratio = median(mine) / median(theirs)
    return [Row(figure=f"resume: {settings.resume_prefix:,}-entry prefix vs {TAIL}-entry record",
                ours=fmt_seconds(median(mine)), baseline=fmt_seconds(median(theirs)), ratio=ratio,
                target=f"<= {RESUME_TARGET:g}x", met=verdict(ratio <= RESUME_TARGET),
                note=f"median of {reps} interleaved resumes each; both read {TAIL} entries",
                raw={"ours_s": mine, "baseline_s": theirs})]


# search ------------------------------------------------------------------------------
_LIKE_SQL = ("SELECT chat_id FROM messages WHERE {terms} GROUP BY chat_id ORDER BY max(rowid) DESC LIMIT ?")


_RAW_MATCH_SQL = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT ?"


def search_rows(settings: Settings) -> list[Row]:
    """search_sessions (the default order, recent) over the store's 100 generated queries vs
    a LIKE scan of the message content (the same chats-then-sessions work, no index); and,
    per query in the same loop, where the time goes: the raw FTS5 MATCH of the newest 500
    matching rowids, matching_chats (the match + the chat lookup), and search_sessions with
    ``order="relevance"`` (bm25 over the newest 500) for comparison."""
    from steerable_agent_runtime.storage.search import SEARCH_CANDIDATES, matching_chats

    info = settings.main_store()
    queries = info.queries[:settings.queries]
    storage = SqliteStorage(info.path)
    like = sqlite3.connect(f"file:{info.path}?mode=ro", uri=True)
    parts: dict[str, list[float]] = {"raw": [], "chats": [], "relevance": []}
    conn = storage.conn
    try:
        mine, theirs, hits = [], [], 0
        profiled(settings, "search", lambda: [awaited(storage.search_sessions(q)) for q in queries[:20]])
        for i, query in enumerate(queries):
            ours_first = i % 2 == 0
            if not ours_first and i < settings.like_queries:
                theirs.append(_like_search(like, query))

            def search() -> None:
                nonlocal hits
                seconds, found = awaited(storage.search_sessions(query, limit=20))
                mine.append(seconds)
                hits += bool(found)

            # Whichever statement meets a query first reads its pages into SQLite's cache
            # for the others: the first place rotates over the four (ours, raw, chats, relevance).
            sides = [search,
                     lambda: parts["raw"].append(
                         timed(lambda: conn.execute(_RAW_MATCH_SQL, (query, SEARCH_CANDIDATES)).fetchall())[0]),
                     lambda: parts["chats"].append(timed(lambda: matching_chats(conn, query, 20, fts=True))[0]),
                     lambda: parts["relevance"].append(
                         awaited(storage.search_sessions(query, limit=20, order="relevance"))[0])]
            for side in sides[i % 4:] + sides[:i % 4]:
                side()
            if ours_first and i < settings.like_queries:
                theirs.append(_like_search(like, query))
    finally:
        like.close()
        storage.close_sync()
    if hits == 0:
        raise RuntimeError("search: no query matched anything; the generated store or the queries are wrong")
    p50, p95 = percentile(mine, 50), percentile(mine, 95)
    b50, b95 = percentile(theirs, 50), percentile(theirs, 95)
    note = (f"{len(mine)} queries over {info.messages:,} messages ({hits} with hits); LIKE scan over the first "
            f"{len(theirs)} of them")
    split = "; ".join(f"{name} p50 {fmt_seconds(percentile(v, 50))} p95 {fmt_seconds(percentile(v, 95))}"
                      for name, v in parts.items())
    raw50, raw95 = percentile(parts["raw"], 50), percentile(parts["raw"], 95)
    return [
        Row(figure="search p50 (search_sessions, order recent)", ours=fmt_seconds(p50), baseline=fmt_seconds(b50) + " LIKE",
            ratio=p50 / b50, target=f"p50 <= {SEARCH_P50_TARGET_MS:g} ms",
            met=verdict(p50 * 1000 <= SEARCH_P50_TARGET_MS), note=note,
            raw={"ours_s": mine, "baseline_s": theirs, **{f"{k}_s": v for k, v in parts.items()}}),
        Row(figure="search p95 (search_sessions, order recent)", ours=fmt_seconds(p95), baseline=fmt_seconds(b95) + " LIKE",
            ratio=p95 / b95, target=f"p95 <= {SEARCH_P95_TARGET_MS:g} ms",
            met=verdict(p95 * 1000 <= SEARCH_P95_TARGET_MS), note=note),
        Row(figure="search p50 vs raw FTS5 MATCH (newest 500, no rank)", ours=fmt_seconds(p50),
            baseline=fmt_seconds(raw50) + " MATCH", ratio=p50 / raw50, target="(context)", met="n/a",
            note=f"same queries, same loop: {split}; raw p95 {fmt_seconds(raw95)}"),
    ]


def _like_search(conn: sqlite3.Connection, query: str) -> float:
    words = query.split()
    terms = " AND ".join(["json_extract(data, '$.content') LIKE ?"] * len(words))
    started = time.perf_counter()
    chats = [r[0] for r in conn.execute(_LIKE_SQL.format(terms=terms), (*[f"%{w}%" for w in words], 20))]
    for chat in chats:
        [json.loads(r[0]) for r in conn.execute(
            "SELECT data FROM sessions WHERE chat_id = ? ORDER BY created_at, session_id", (chat,))]
    return time.perf_counter() - started
