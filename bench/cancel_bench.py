"""Cancel latency while the model is silent: CoreLoop.cancel() to the turn's last event, per provider.

For each wire (OpenAI chat/completions, OpenAI Responses, Anthropic under CacheControlProvider,
Gemini) the replay server (tests/replay_server.py, 127.0.0.1, in this process's threads) sends
the recorded text stream's events up to the first text delta, then holds the connection open
and silent for ``--silence`` seconds. A task runs the turn; another calls ``cancel()`` 50 ms
after the first delta arrived and times how long the turn takes to end. Also reported: whether
the server saw the client close the connection during the silence (``closed_in_stall``, 0 on
a build whose replay server does not count it).

Usage (from the repository root; it runs on any build, also one without llm.cancel):
    .venv/bin/python bench/cancel_bench.py [--silence 10] [--reps 5] [--json OUT]

Nothing here asserts a time (tests/llm/test_cancel_stream.py holds the correctness bound).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm.wire_cases import ANTHROPIC_KEY, GEMINI_KEY, STREAMS  # noqa: E402 - after the sys.path line
from tests.replay_server import ReplayServer, Reply  # noqa: E402


def wires() -> dict[str, tuple[object, bytes]]:
    from steerable_agent_runtime.llm import (
        AnthropicProvider,
        CacheControlProvider,
        GoogleGenAIProvider,
        OpenAICompatProvider,
        OpenAIResponsesProvider,
    )

    return {
        "openai_compat": (lambda url: OpenAICompatProvider("gpt-4.1-mini", url + "/v1", api_key="sk-bench"), b"Lisbo"),
        "openai_responses": (lambda url: OpenAIResponsesProvider("gpt-4.1-mini", "sk-bench", base_url=url + "/v1"),
                             b"Lisbon"),
        "anthropic": (lambda url: CacheControlProvider(AnthropicProvider("claude-sonnet-4-5", ANTHROPIC_KEY,
                                                                         base_url=url)), b"Hello"),
        "gemini": (lambda url: GoogleGenAIProvider("gemini-2.5-flash", GEMINI_KEY, base_url=url), b"Hello"),
    }


def silent_reply(wire: str, marker: bytes, silence_s: float) -> Reply:
    reply = Reply.sse_file(STREAMS / wire / "text.sse")
    reply.stall_after = next(i for i, chunk in enumerate(reply.chunks) if marker in chunk) + 1
    reply.stall_s = silence_s
    return reply


async def one_cancel(provider: object) -> tuple[float, str]:
    """Seconds from cancel() to the end of the turn, and the completion status."""
    from steerable_agent_runtime.loop import CoreLoop

    loop = CoreLoop(provider)
    first = asyncio.Event()
    status: list[str] = []

    async def consume() -> None:
        async for event in loop.run([{"role": "user", "content": "hi"}], chat_id="bench"):
            if event.kind == "content_delta":
                first.set()
            elif event.kind == "completion":
                status.append(event.data["status"])

    task = asyncio.create_task(consume())
    await first.wait()
    await asyncio.sleep(0.05)  # the loop is back waiting on the silent server
    started = time.perf_counter()
    loop.cancel()
    await task
    return time.perf_counter() - started, status[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--silence", type=float, default=10.0, help="seconds the server stays silent")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict[str, object] = {"silence_s": args.silence, "reps": args.reps}
    for wire, (make, marker) in wires().items():
        samples, statuses, closed = [], set(), 0
        for _ in range(args.reps):
            with ReplayServer([silent_reply(wire, marker, args.silence)]) as server:
                took, status = asyncio.run(one_cancel(make(server.url)))
                deadline = time.monotonic() + 1.0
                while getattr(server, "closed_in_stall", 0) < 1 and time.monotonic() < deadline:
                    time.sleep(0.01)
                closed += getattr(server, "closed_in_stall", 0)
            samples.append(took)
            statuses.add(status)
        report[wire] = {"median_s": statistics.median(samples), "max_s": max(samples), "samples_s": samples,
                        "statuses": sorted(statuses), "closed_in_stall": closed}
        print(f"{wire:<18} cancel -> end of turn: median {statistics.median(samples) * 1000:9.1f} ms, "
              f"max {max(samples) * 1000:9.1f} ms, status {sorted(statuses)}, "
              f"connection closed during the silence {closed}/{args.reps}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
