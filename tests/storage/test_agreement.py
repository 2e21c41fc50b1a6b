"""A hypothesis state machine: the same random steps on every store agree.

InMemoryStorage is the reference; SqliteStorage, SqlAlchemyStorage on sqlite+aiosqlite and
SqlAlchemyStorage on PostgreSQL must give the same results and the same errors. All calls of
one example run in one event loop (as in a server), so the SQLAlchemy pools are reused.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from steerable_agent_runtime import InMemoryStorage, SqliteStorage, SteerableError
from tests.helpers import boundary, event, item, message, run, seed, session, span, trace

ids = st.sampled_from(["a", "b", "c"])
minutes = st.integers(0, 30)
entry = st.one_of(
    st.text(max_size=12).map(item),
    st.text(max_size=12).map(boundary),
    st.text(max_size=12).map(seed),
    st.just({"type": "unknown-kind"}),
    st.integers(1, 6).map(lambda s: {**item("seq"), "seq": s}),
)


def outcome(coro, loop=None):
    """Result of a call, or the error type and its structured fields, so failures compare too."""
    try:
        return ("ok", run(coro) if loop is None else loop.run_until_complete(coro))
    except SteerableError as exc:
        return ("error", type(exc).__name__, exc.record_id, exc.seq)


def without_at(result):
    """History entries carry an `at` stamped by the clock when absent; compare without it."""
    if result[0] == "ok" and isinstance(result[1], list) and result[1] and isinstance(result[1][0], dict):
        return ("ok", [{k: v for k, v in e.items() if k != "at"} for e in result[1]])
    return result


class StoresAgree(RuleBasedStateMachine):
    postgres_url: str | None = None  # set by the PostgreSQL test; its tables are emptied after each example

    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.loop = asyncio.new_event_loop()
        self.memory = InMemoryStorage()
        self.others = [SqliteStorage(self.dir / "s.db", synchronous="NORMAL")]
        if self.postgres_url is not None:
            from steerable_agent_runtime.storage.sqlalchemy import SqlAlchemyStorage

            self.others.append(SqlAlchemyStorage(f"sqlite+aiosqlite:///{self.dir / 'sqla.db'}"))
            self.others.append(SqlAlchemyStorage(self.postgres_url))

    def both(self, call):
        left = without_at(outcome(call(self.memory), self.loop))
        for other in self.others:
            assert without_at(outcome(call(other), self.loop)) == left, other
        return left

    @rule(sid=ids, chat=ids, active=st.booleans(), minute=minutes)
    def upsert_session(self, sid, chat, active, minute):
        self.both(lambda s: s.upsert_session(session(sid, chat=chat, active=active, minute=minute)))

    @rule(mid=st.sampled_from(["m1", "m2", "m3", "m4"]), chat=ids, minute=minutes, text=st.text(max_size=10))
    def append_message(self, mid, chat, minute, text):
        self.both(lambda s: s.append_message(message(mid, chat=chat, minute=minute, content=text)))

    @rule(tid=ids, sid=ids, chat=ids, minute=minutes)
    def upsert_trace(self, tid, sid, chat, minute):
        self.both(lambda s: s.upsert_trace(trace(tid, sid=sid, chat=chat, minute=minute)))

    @rule(tid=ids, spid=ids, minute=minutes)
    def add_span_and_event(self, tid, spid, minute):
        self.both(lambda s: s.add_span(tid, span(spid, minute=minute)))
        self.both(lambda s: s.add_event(tid, event("e" + spid, spid, minute=minute)))

    @rule(record=ids, entries=st.lists(entry, max_size=4))
    def append_history(self, record, entries):
        self.both(lambda s: s.append_history(record, entries))

    @rule(record=ids, after=st.none() | st.integers(0, 8), until=st.none() | st.integers(0, 8),
          limit=st.none() | st.integers(0, 5), reverse=st.booleans())
    def list_history(self, record, after, until, limit, reverse):
        self.both(lambda s: s.list_history(record, after_seq=after, until_seq=until, limit=limit, reverse=reverse))

    @rule(chat=ids, limit=st.none() | st.integers(0, 4))
    def list_messages(self, chat, limit):
        self.both(lambda s: s.list_messages(chat, limit=limit))

    @rule(user=st.none() | st.just("u1"), chat=st.none() | ids, active=st.booleans())
    def list_sessions(self, user, chat, active):
        self.both(lambda s: s.list_sessions(user_id=user, chat_id=chat, active_only=active))

    @rule(tid=ids)
    def traces_spans_events(self, tid):
        self.both(lambda s: s.list_traces())
        self.both(lambda s: s.list_spans(tid))
        self.both(lambda s: s.list_events(tid))

    @invariant()
    def checkpoints_agree(self):
        for record in ("a", "b", "c"):
            self.both(lambda s: s.history_checkpoint(record))

    def teardown(self):
        for other in self.others:
            self.loop.run_until_complete(other.close())
        if self.postgres_url is not None:
            self.loop.run_until_complete(empty_postgres(self.postgres_url))
        self.loop.close()
        shutil.rmtree(self.dir)


async def empty_postgres(url: str) -> None:
    """Empty every table of the store at ``url`` (the next example starts from nothing)."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("TRUNCATE sessions, messages, traces, spans, events, history RESTART IDENTITY"))
    await engine.dispose()


StoresAgree.TestCase.settings = settings(stateful_step_count=30, deadline=None)  # examples: the profile
test_storages_agree = StoresAgree.TestCase


def test_sqlalchemy_stores_agree(pg_url):
    """The same machine with SqlAlchemyStorage on sqlite+aiosqlite and on PostgreSQL added."""
    machine = type("StoresAgreeSql", (StoresAgree,), {"postgres_url": pg_url})
    examples = settings().max_examples  # the profile's; the ci profile's 40 would take ~25 s here
    run_state_machine_as_test(machine, settings=settings(max_examples=12 if examples <= 40 else examples,
                                                         stateful_step_count=30, deadline=None))
