"""A hypothesis state machine: the same random steps on InMemoryStorage and SqliteStorage agree."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

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


def outcome(coro):
    """Result of a call, or the error type and its structured fields, so failures compare too."""
    try:
        return ("ok", run(coro))
    except SteerableError as exc:
        return ("error", type(exc).__name__, exc.record_id, exc.seq)


class StoresAgree(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.memory = InMemoryStorage()
        self.sqlite = SqliteStorage(self.dir / "s.db", synchronous="NORMAL")

    def both(self, call):
        left, right = outcome(call(self.memory)), outcome(call(self.sqlite))
        if left[0] == "ok" and right[0] == "ok" and isinstance(left[1], list) and left[1] and isinstance(left[1][0], dict):
            # history entries carry an `at` stamped by the clock when absent; compare without it
            left = ("ok", [{k: v for k, v in e.items() if k != "at"} for e in left[1]])
            right = ("ok", [{k: v for k, v in e.items() if k != "at"} for e in right[1]])
        assert left == right
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
        run(self.sqlite.close())
        shutil.rmtree(self.dir)


StoresAgree.TestCase.settings = settings(stateful_step_count=30, deadline=None)  # examples: the profile
test_storages_agree = StoresAgree.TestCase
