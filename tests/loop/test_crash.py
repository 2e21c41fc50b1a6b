"""Crash safety with real processes: a child runs a multi-round loop against
``python -m tests.replay_server`` (an OpenAI-compatible SSE model) on SqliteStorage and is killed
with SIGKILL at random points. After every kill: ``steerable-maint check`` is clean, nothing
acknowledged is lost, and a resume sends no tool call without its result (an interrupted call gets
the "interrupted; verify its side effects" result, appended to the record)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from steerable_agent_runtime import SqliteStorage, resume_transcript
from steerable_agent_runtime.llm import LLMError, ScriptedProvider, ScriptedResponse
from steerable_agent_runtime.loop import INTERRUPTED_ERROR, CoreLoop
from steerable_agent_runtime.loop.record import dangling_calls

from steerable_maint.cli import main as cli_main
from tests.helpers import run
from tests.loop.kit import drain, transcript_digest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("steerable_agent_runtime.llm.openai_compat")


def sse_step(i: int) -> list[str]:
    """One OpenAI chat/completions stream: a little text, then a call of step(i), then usage."""
    head = {"id": f"chatcmpl-{i}", "object": "chat.completion.chunk", "model": "replay-model"}

    def chunk(delta, finish=None, **extra):
        return "data: " + json.dumps({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                                      **extra}) + "\n\n"

    call = {"index": 0, "id": f"call_{i}", "type": "function", "function": {"name": "step", "arguments": ""}}
    return [chunk({"role": "assistant", "content": f"Step {i} "}), chunk({"content": "next."}),
            chunk({"tool_calls": [call]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps({"i": i})[:4]}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps({"i": i})[4:]}}]}),
            chunk({}, "tool_calls"),
            "data: " + json.dumps({**head, "choices": [], "usage": {"prompt_tokens": 50 + i, "completion_tokens": 9,
                                                                   "total_tokens": 59 + i}}) + "\n\n",
            "data: [DONE]\n\n"]


class Model:
    """``python -m tests.replay_server`` as a process, replaying ``replies`` step streams."""

    def __init__(self, tmp: Path, replies: int) -> None:
        script = tmp / "script.json"
        script.write_text(json.dumps([{"chunks": sse_step(i), "delayS": 0.002} for i in range(replies)]))
        port_file = tmp / "port"
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.replay_server", str(script), "--port-file",
                                      str(port_file)], cwd=ROOT)
        deadline = time.monotonic() + 20
        while not port_file.exists():
            assert time.monotonic() < deadline and self.proc.poll() is None, "replay server did not start"
            time.sleep(0.02)
        self.base_url = f"http://127.0.0.1:{port_file.read_text()}/v1"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def child(db: Path, base_url: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.loop.crash_child", str(db), base_url, *extra], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def kill_at_random(proc: subprocess.Popen, rng: random.Random) -> list[tuple[int, str]]:
    """SIGKILL the child at a random point; return the ACKs it printed.

    One kill in five lands in the first round (right after the loop's first event, before or
    while the first request runs); the others a random while after the first ACK (the first
    request of a fresh process is slow: the HTTP client's start-up), i.e. in later rounds:
    inside a stream, a tool, a flush."""
    lines = [proc.stdout.readline()]
    assert lines[0].strip() == "STARTED"
    if rng.random() >= 0.2:
        lines.append(proc.stdout.readline())
    time.sleep(rng.uniform(0.0, 0.4))
    proc.send_signal(signal.SIGKILL)
    lines.extend(proc.stdout.read().splitlines())
    proc.wait()
    acks = []
    for line in lines:
        if line.startswith("ACK "):
            _, n, digest = line.split()
            acks.append((int(n), digest))
    return acks


def check_clean(db: Path) -> None:
    """``steerable-maint check DB --json`` (through click's runner: the CLI's code, no new interpreter)."""
    done = CliRunner().invoke(cli_main, ["check", str(db), "--json"])
    report = json.loads(done.stdout)
    errors = [f for f in report.get("findings", []) if f.get("severity") == "error"]
    assert done.exit_code == 0 and not errors, (done.exit_code, errors, done.output)


def verify_after_kill(db: Path, acked: list[tuple[int, str]]) -> int:
    """No acknowledged item lost; a resume repairs every dangling call and records the repair.

    Returns how many calls the resume found interrupted."""
    store = SqliteStorage(db)
    try:
        transcript = run(resume_transcript(store, "chat"))
        for n, digest in acked:
            assert len(transcript) >= n and transcript_digest(transcript[:n]) == digest
        dangling = dangling_calls(transcript)
        # A real resume: the provider refuses (auth), so the turn ends after the repair was written.
        provider = ScriptedProvider([ScriptedResponse(error=LLMError("stop here", kind="auth"))])
        events = run(drain(CoreLoop(provider, storage=store).resume("chat")))
        assert events[-1].data["status"] == "failed"
        sent = provider.requests[0].messages
        assert dangling_calls(sent) == []
        repairs = [m for m in sent[len(transcript):] if m.role == "tool"]
        assert [m.tool_call_id for m in repairs] == [call["id"] for _, call in dangling]
        assert all(INTERRUPTED_ERROR in m.content for m in repairs)
        assert run(resume_transcript(store, "chat")) == sent  # the repair is in the record
        return len(dangling)
    finally:
        run(store.close())


def kill_rounds(tmp_path: Path, rounds: int, seed: int) -> dict[str, int]:
    """Kill ``rounds`` children, verify after each; returns the counts of what happened (kills,
    clean checks, verified resumes, calls the resumes found interrupted, tool calls in the end)."""
    rng = random.Random(seed)
    db = tmp_path / "sessions.db"
    model = Model(tmp_path, replies=rounds * 40 + 10)
    counts = {"kills": 0, "before_any_write": 0, "checks_clean": 0, "resumes_verified": 0, "interrupted_calls": 0,
              "acks_seen": 0}
    try:
        acked: list[tuple[int, str]] = []
        for _ in range(rounds):
            acks = kill_at_random(child(db, model.base_url), rng)
            counts["kills"] += 1
            counts["acks_seen"] += len(acks)
            if not db.exists():
                counts["before_any_write"] += 1
                continue
            check_clean(db)
            counts["checks_clean"] += 1
            acked = acked + acks[-1:] if acks else acked
            counts["interrupted_calls"] += verify_after_kill(db, acked)
            counts["resumes_verified"] += 1
        final = child(db, model.base_url, "--max-rounds", "3")
        out, _ = final.communicate(timeout=60)
        assert final.returncode == 0 and "DONE budget_exhausted" in out, out
        check_clean(db)
        counts["checks_clean"] += 1
        store = SqliteStorage(db)
        transcript = run(resume_transcript(store, "chat"))
        run(store.close())
        assert dangling_calls(transcript) == []
        calls = [c["id"] for m in transcript if m.role == "assistant" for c in m.tool_calls or ()]
        assert len(calls) == len(set(calls)) >= rounds  # the run made progress across the kills
        counts["tool_calls_in_record"] = len(calls)
        return counts
    finally:
        model.close()


def test_loop_survives_sigkill_at_random_points(tmp_path):
    kill_rounds(tmp_path, rounds=20, seed=12)


@pytest.mark.soak
def test_loop_survives_sigkill_soak(tmp_path):
    """``LOOP_SOAK_KILLS`` kills (default 200) from seed ``LOOP_SOAK_SEED`` (default 1212); run
    with ``-s`` to see the counts (DEVELOPERS.md, "Slow runs")."""
    kills = int(os.environ.get("LOOP_SOAK_KILLS", "200"))
    seed = int(os.environ.get("LOOP_SOAK_SEED", "1212"))
    started = time.monotonic()
    counts = kill_rounds(tmp_path, rounds=kills, seed=seed)
    print(f"\nloop kill -9 soak: seed {seed}, {time.monotonic() - started:.0f} s,",
          ", ".join(f"{k} {v}" for k, v in counts.items()))
    assert counts["kills"] == kills and counts["resumes_verified"] == kills - counts["before_any_write"]
    assert counts["interrupted_calls"] >= 1  # some kills landed inside a tool call
