"""Sidecar benchmarks (issue 14), each against a baseline measured in the same run and venv,
repetitions interleaved, medians compared. Reports; asserts nothing.

1. cold start: spawn ``python -m steerable_agent_runtime.sidecar --storage-path NEW.db`` and
   read stdout until the ``lifecycle.ready`` notification, vs spawning
   ``python -c "from pydantic import BaseModel"`` until it exits. Target: <= 2.5x.
2. relay: a 20,000-chunk OpenAI-compatible SSE stream replayed from 127.0.0.1; stream.chunk
   notifications read per second from the sidecar's stdout (request to stream.done), vs a child
   process writing the same JSON lines (the ones the sidecar wrote) straight to a pipe, read by
   the same reader. Target: <= 2x. Each sidecar first runs a 3-chunk warm-up stream, so the
   figure is the relay rate, not the first stream's imports. Also reported, to show where the
   time goes: the provider alone (OpenAICompatProvider parsing the same replayed stream in
   the benchmark's own process, no loop, no sidecar).

Usage:
    python bench/sidecar_bench.py [--runs 7] [--chunks 20000] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.replay_server import ReplayServer, Reply
from tests.sidecar.openai_sse import text_chunks

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
WRITER = ("import os, sys\n"
          "data = open(sys.argv[1], 'rb').read().splitlines(keepends=True)\n"
          "sys.stdout.buffer.write(b'go\\n'); sys.stdout.buffer.flush()\n"
          "for line in data:\n    os.write(1, line)\n")


def sidecar(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "steerable_agent_runtime.sidecar", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)


def cold_start_once(work: Path, index: int) -> float:
    started = time.perf_counter()
    proc = sidecar("--storage-path", str(work / f"cold-{index}.db"))
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    assert b"lifecycle.ready" in line, line
    proc.stdin.close()
    proc.wait(30)
    return elapsed


def pydantic_once() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from pydantic import BaseModel"], check=True, env=ENV)
    return time.perf_counter() - started


def _stream(proc: subprocess.Popen, model: ReplayServer, chat: str) -> tuple[float, list[bytes]]:
    request = {"jsonrpc": "2.0", "id": chat, "method": "agent.chat.stream", "params": {
        "chatId": chat, "messages": [{"role": "user", "content": "go"}],
        "provider": {"kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1"}}}
    started = time.perf_counter()
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    lines: list[bytes] = []
    for line in proc.stdout:
        if b'"stream.chunk"' in line:
            lines.append(line)
        elif b'"stream.done"' in line:
            break
    return time.perf_counter() - started, lines


def relay_once(model: ReplayServer, warm: ReplayServer, chunks: int) -> tuple[float, list[bytes]]:
    """One sidecar: a 3-chunk warm-up stream (the loop, httpx and the provider get imported),
    then the measured stream."""
    proc = sidecar()
    assert b"lifecycle.ready" in proc.stdout.readline()
    _stream(proc, warm, "warm-up")
    elapsed, lines = _stream(proc, model, "bench")
    proc.stdin.close()
    proc.wait(30)
    assert len(lines) == chunks, (len(lines), chunks)
    return elapsed, lines


def provider_once(model: ReplayServer, chunks: int) -> float:
    """The model side alone, in this process: OpenAICompatProvider parsing the same stream."""
    import asyncio

    from steerable_agent_runtime.llm import OpenAICompatProvider
    from steerable_agent_runtime.models import LLMMessage

    async def drain() -> float:
        provider = OpenAICompatProvider("m", model.url + "/v1")
        started = time.perf_counter()
        seen = 0
        async for chunk in provider.stream([LLMMessage(role="user", content="go")]):
            seen += chunk.content_delta is not None and chunk.content_delta != ""
        assert seen == chunks, seen
        return time.perf_counter() - started

    return asyncio.run(drain())


def pipe_once(lines_file: Path, count: int) -> float:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(lines_file)], stdout=subprocess.PIPE, env=ENV)
    assert proc.stdout.readline() == b"go\n"  # interpreter start-up is not part of the figure
    started = time.perf_counter()
    seen = sum(1 for line in proc.stdout if b'"stream.chunk"' in line)
    elapsed = time.perf_counter() - started
    proc.wait(30)
    assert seen == count
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {"python": sys.version.split()[0], "runs": args.runs, "chunks": args.chunks}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours, base = [], []
        for index in range(args.runs):
            ours.append(cold_start_once(work, index))
            base.append(pydantic_once())
        results["cold_start"] = _figure(ours, base, 2.5, "s")
        body = b"".join(text_chunks([f"c{i} " for i in range(args.chunks)]))
        with ReplayServer([Reply(chunks=[body])]) as model, \
                ReplayServer([Reply(chunks=text_chunks(["a", "b", "c"]))]) as warm:
            lines_file = work / "lines.jsonl"
            ours, base, parse = [], [], []
            for _ in range(args.runs):
                elapsed, lines = relay_once(model, warm, args.chunks)
                lines_file.write_bytes(b"".join(lines))
                ours.append(elapsed)
                base.append(pipe_once(lines_file, args.chunks))
                parse.append(provider_once(model, args.chunks))
        relay = _figure(ours, base, 2.0, "s")
        relay["provider_alone_median"] = round(statistics.median(parse), 4)
        relay["provider_alone_chunks_per_s"] = round(args.chunks / statistics.median(parse))
        relay["ratio_vs_provider_alone"] = round(relay["ours_median"] / statistics.median(parse), 2)
        relay["ours_chunks_per_s"] = round(args.chunks / relay["ours_median"])
        relay["baseline_chunks_per_s"] = round(args.chunks / relay["baseline_median"])
        results["relay"] = relay
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def _figure(ours: list[float], base: list[float], target: float, unit: str) -> dict:
    o, b = statistics.median(ours), statistics.median(base)
    return {"ours_median": round(o, 4), "baseline_median": round(b, 4), "unit": unit, "ratio": round(o / b, 2),
            "target": target, "met": o / b <= target, "ours_all": [round(x, 4) for x in ours],
            "baseline_all": [round(x, 4) for x in base]}


if __name__ == "__main__":
    main()
