"""Sidecar benchmarks (issue 14), each against a baseline measured in the same run and venv,
repetitions interleaved, medians compared. Reports; asserts nothing.

1. cold start: spawn ``python -m steerable_agent_runtime.sidecar --storage-path NEW.db`` and
   read stdout until the ``lifecycle.ready`` notification, vs spawning
   ``python -c "from pydantic import BaseModel"`` until it exits. Target: <= 2.5x.
2. relay: a 20,000-chunk OpenAI-compatible SSE stream replayed from 127.0.0.1; stream.chunk
   notifications read per second from the sidecar's stdout (request to stream.done), vs a child
   process writing the same JSON lines (the ones the sidecar wrote) straight to a pipe, read by
   the same reader. Target: <= 2x. Each sidecar first runs a 3-chunk warm-up stream, so the
   figure is the relay rate, not the first stream's imports.

The model is ``python -m tests.replay_server`` in its own process, serving each stream as one
write of the whole body: it shares neither a core's time slice nor a GIL with the reader, and
never waits on the sidecar's pace.

Also reported, to show where the time goes (context, not targets):
- CPU per chunk of each process during the measured stream (the sidecar, the model server,
  the reader), and the baseline writer's CPU per line: a machine shared with other jobs
  stretches wall times, CPU times much less. ``first_chunk_ms``: request to the first
  stream.chunk line (what a stream costs before its chunks, wall).
- the provider alone: OpenAICompatProvider parsing the same replayed stream in this process
  (no loop, no sidecar), wall and CPU.
- ``--breakdown``: the sidecar's path rebuilt layer by layer in this process, CPU per chunk
  (HTTP read, SSE decode, the chunk read, CoreLoop, the relay to /dev/null; see
  bench/sidecar_layers.py) and the CPU a 3-chunk stream costs.

Usage:
    python bench/sidecar_bench.py [--runs 7] [--chunks 20000] [--breakdown] [--out results.json]
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

from tests.sidecar.openai_sse import text_chunks

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "runtime"), str(ROOT)])}
WRITER = ("import os, sys\n"
          "data = open(sys.argv[1], 'rb').read().splitlines(keepends=True)\n"
          "sys.stdout.buffer.write(b'go\\n'); sys.stdout.buffer.flush()\n"
          "for line in data:\n    os.write(1, line)\n")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """CPU seconds of a live child: the run time of its threads in nanoseconds (procfs
    ``schedstat``; a thread that already exited is not counted), else user + system time in
    clock ticks (10 ms: 0.5 us per chunk of a 20,000-chunk stream)."""
    try:
        return sum(int((task / "schedstat").read_text().split()[0]) for task in Path(f"/proc/{pid}/task").iterdir()) / 1e9
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK


class Model:
    """``python -m tests.replay_server`` in a child process, replaying one reply forever."""

    def __init__(self, work: Path, name: str, chunks: list[bytes]) -> None:
        script, port = work / f"{name}.json", work / f"{name}.port"
        script.write_text(json.dumps([{"chunks": [b"".join(chunks).decode()]}]))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.replay_server", str(script), "--port-file", str(port)],
                                     cwd=ROOT, env=ENV)
        deadline = time.monotonic() + 60
        while not port.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the replay server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port.read_text()}"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


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


def _stream(proc: subprocess.Popen, model: Model, chat: str, first: list[float] | None = None) -> tuple[float, list[bytes]]:
    """One stream, request to ``stream.done``: its wall time and its chunk lines (``first``
    gets the time to the first chunk line)."""
    request = {"jsonrpc": "2.0", "id": chat, "method": "agent.chat.stream", "params": {
        "chatId": chat, "messages": [{"role": "user", "content": "go"}],
        "provider": {"kind": "openai_compat", "model": "m", "baseUrl": model.url + "/v1"}}}
    started = time.perf_counter()
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    proc.stdin.flush()
    lines: list[bytes] = []
    for line in proc.stdout:
        if b'"stream.chunk"' in line:
            if not lines and first is not None:
                first.append(time.perf_counter() - started)
            lines.append(line)
        elif b'"stream.done"' in line:
            break
    return time.perf_counter() - started, lines


def relay_once(model: Model, warm: Model, chunks: int) -> tuple[float, list[bytes], dict[str, float]]:
    """One sidecar: a 3-chunk warm-up stream (the loop, httpx and the provider get imported),
    then the measured stream; its wall time, its lines and the CPU seconds each process spent."""
    proc = sidecar()
    assert b"lifecycle.ready" in proc.stdout.readline()
    _stream(proc, warm, "warm-up")
    side, served, read = cpu_s(proc.pid), cpu_s(model.proc.pid), time.process_time()
    first: list[float] = []
    elapsed, lines = _stream(proc, model, "bench", first)
    cpu = {"sidecar": cpu_s(proc.pid) - side, "model": cpu_s(model.proc.pid) - served,
           "reader": time.process_time() - read, "first_chunk_s": first[0]}
    proc.stdin.close()
    proc.wait(30)
    assert len(lines) == chunks, (len(lines), chunks)
    return elapsed, lines, cpu


def provider_once(model: Model, chunks: int) -> tuple[float, float]:
    """The model side alone, in this process: OpenAICompatProvider parsing the same stream
    (wall and CPU seconds)."""
    import asyncio

    from steerable_agent_runtime.llm import OpenAICompatProvider
    from steerable_agent_runtime.models import LLMMessage

    async def drain() -> tuple[float, float]:
        provider = OpenAICompatProvider("m", model.url + "/v1")
        started, cpu = time.perf_counter(), time.process_time()
        seen = 0
        async for chunk in provider.stream([LLMMessage(role="user", content="go")]):
            seen += chunk.content_delta is not None and chunk.content_delta != ""
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        await provider.aclose()
        assert seen == chunks, seen
        return elapsed, cpu

    return asyncio.run(drain())


def pipe_once(lines_file: Path, count: int) -> tuple[float, dict[str, float]]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(lines_file)], stdout=subprocess.PIPE, env=ENV)
    assert proc.stdout.readline() == b"go\n"  # interpreter start-up is not part of the figure
    writer, read = cpu_s(proc.pid), time.process_time()
    started = time.perf_counter()
    seen = sum(1 for line in proc.stdout if b'"stream.chunk"' in line)
    elapsed = time.perf_counter() - started
    cpu = {"writer": cpu_s(proc.pid) - writer, "reader": time.process_time() - read}
    proc.wait(30)
    assert seen == count
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--breakdown", action="store_true", help="also the in-process CPU per layer")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {"python": sys.version.split()[0], "runs": args.runs, "chunks": args.chunks,
                                  "loadavg_start": list(os.getloadavg())}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours, base = [], []
        for index in range(args.runs):
            ours.append(cold_start_once(work, index))
            base.append(pydantic_once())
        results["cold_start"] = _figure(ours, base, 2.5, "s")
        model = Model(work, "model", text_chunks([f"c{i} " for i in range(args.chunks)]))
        warm = Model(work, "warm", text_chunks(["a", "b", "c"]))
        try:
            lines_file = work / "lines.jsonl"
            ours, base, parse, parse_cpu, cpus, pipe_cpus = [], [], [], [], [], []
            for _ in range(args.runs):
                elapsed, lines, cpu = relay_once(model, warm, args.chunks)
                lines_file.write_bytes(b"".join(lines))
                ours.append(elapsed)
                cpus.append(cpu)
                elapsed, cpu = pipe_once(lines_file, args.chunks)
                base.append(elapsed)
                pipe_cpus.append(cpu)
                wall, cpu_used = provider_once(model, args.chunks)
                parse.append(wall)
                parse_cpu.append(cpu_used)
            if args.breakdown:
                from sidecar_layers import layers  # bench/ is this script's directory

                results["breakdown_us_per_chunk"] = layers(model.url + "/v1", args.chunks, reps=max(3, args.runs),
                                                           small_url=warm.url + "/v1")
        finally:
            model.close()
            warm.close()
    relay = _figure(ours, base, 2.0, "s")
    per = 1e6 / args.chunks
    relay["ours_chunks_per_s"] = round(args.chunks / relay["ours_median"])
    relay["baseline_chunks_per_s"] = round(args.chunks / relay["baseline_median"])
    relay["first_chunk_ms"] = round(statistics.median(c.pop("first_chunk_s") for c in cpus) * 1e3, 1)
    relay["cpu_us_per_chunk"] = {key: round(statistics.median(c[key] for c in cpus) * per, 2) for key in cpus[0]}
    relay["baseline_cpu_us_per_line"] = {key: round(statistics.median(c[key] for c in pipe_cpus) * per, 2)
                                         for key in pipe_cpus[0]}
    relay["provider_alone_median"] = round(statistics.median(parse), 4)
    relay["provider_alone_chunks_per_s"] = round(args.chunks / statistics.median(parse))
    relay["provider_alone_cpu_us_per_chunk"] = round(statistics.median(parse_cpu) * per, 2)
    relay["ratio_vs_provider_alone"] = round(relay["ours_median"] / statistics.median(parse), 2)
    results["relay"] = relay
    results["loadavg_end"] = list(os.getloadavg())
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


def _figure(ours: list[float], base: list[float], target: float, unit: str) -> dict:
    o, b = statistics.median(ours), statistics.median(base)
    # best_ratio: fastest against fastest, context for a loaded machine (the least disturbed
    # repetition of each); the figure is the median ratio. Times are kept to the microsecond: a
    # short relay (the smoke test's 300 chunks) lasts 2-4 ms, and each median rounded to 0.1 ms
    # was off by up to 2.5 %, its ratio by more than the smoke test's tolerance
    return {"ours_median": round(o, 6), "baseline_median": round(b, 6), "unit": unit, "ratio": round(o / b, 2),
            "target": target, "met": o / b <= target, "best_ratio": round(min(ours) / min(base), 2),
            "ours_all": [round(x, 6) for x in ours],
            "baseline_all": [round(x, 6) for x in base]}


if __name__ == "__main__":
    main()
