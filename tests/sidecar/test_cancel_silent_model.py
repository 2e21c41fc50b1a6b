"""agent.chat.cancel while the model is silent, through the real sidecar binary.

The replay server (127.0.0.1) sends the role chunk and one text chunk, then holds the
connection open and silent for a minute. The cancel must end the stream at once (stream.done
``cancelled`` well within the 5 s correctness bound, where before it waited for the model's
next bytes), close the connection to the model, and leave the partial answer in the record.
"""

from __future__ import annotations

import time

from steerable_agent_runtime import SqliteStorage

from tests.helpers import run
from tests.replay_server import ReplayServer, Reply

from .openai_sse import text_chunks

BOUND_S = 5.0


def silent_model() -> ReplayServer:
    """The role chunk and "Hello ", then a minute of silence."""
    return ReplayServer([Reply(chunks=text_chunks(["Hello ", "never sent"]), stall_after=2, stall_s=60.0)])


def start_stream(sc, model: ReplayServer) -> str:
    """A stream on ``model``, once its first chunk was relayed and the sidecar waits again."""
    stream_id = sc.call("agent.chat.stream", {
        "chatId": "c1", "messages": [{"role": "user", "content": "hi"}],
        "provider": {"kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1"}})["streamId"]
    sc.wait(lambda: sc.notifications_of("stream.chunk", stream_id), what="the first chunk")
    time.sleep(0.2)  # the sidecar is back waiting on the silent model
    return stream_id


def record_items(db: str) -> list[tuple[str, str]]:
    store = SqliteStorage(db)
    try:
        entries = run(store.list_history("c1"))
    finally:
        run(store.close())
    return [(e["message"]["role"], e["message"]["content"]) for e in entries if e["type"] == "item"]


def test_cancel_while_the_model_is_silent_ends_the_stream_at_once(spawn, tmp_path):
    db = str(tmp_path / "s.db")
    with silent_model() as model:
        sc = spawn("--storage-path", db)
        sc.wait_ready()
        stream_id = start_stream(sc, model)
        started = time.monotonic()
        assert sc.call("agent.chat.cancel", {"streamId": stream_id}) == {"accepted": True}
        done = sc.wait_done(stream_id, timeout=30.0)
        took = time.monotonic() - started
        assert took < BOUND_S, f"the cancel took {took:.1f} s: it waited for the silent model"
        assert done["status"] == "cancelled", done
        assert [c.get("delta") for c in sc.notifications_of("stream.chunk", stream_id)] == ["Hello "]
        assert sc.notifications_of("stream.error", stream_id) == []
        deadline = time.monotonic() + BOUND_S
        while model.closed_in_stall < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert model.closed_in_stall == 1, "the sidecar left the connection to the model open"
        sc.close_stdin()
        assert sc.exit_code() == 0
        assert not any("Task was destroyed" in line or "Traceback" in line for line in sc.stderr_lines), sc.stderr_lines
    assert record_items(db) == [("user", "hi"), ("assistant", "Hello ")]


def test_sigterm_while_the_model_is_silent_stops_at_once_and_records_the_partial_answer(spawn, tmp_path):
    """Shutdown asks every stream to cancel, then waits up to 10 s before cancelling it hard:
    with a silent model it used to wait all of that (10.7 s measured before this change)."""
    db = str(tmp_path / "s.db")
    with silent_model() as model:
        sc = spawn("--storage-path", db)
        sc.wait_ready()
        stream_id = start_stream(sc, model)
        started = time.monotonic()
        sc.terminate()
        assert sc.exit_code() == 0
        took = time.monotonic() - started
        assert took < BOUND_S, f"the shutdown took {took:.1f} s: it waited for the silent model"
        assert sc.notifications_of("stream.done", stream_id)[0]["status"] == "cancelled"
    assert record_items(db) == [("user", "hi"), ("assistant", "Hello ")]
