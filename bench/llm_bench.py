"""LLM provider benchmarks: stream parse time vs the official openai SDK, and import time vs httpx.

1. Parse time: one 20,000-chunk chat/completions stream (text deltas, then the finish chunk,
   the usage chunk and ``[DONE]``), replayed by ``tests.replay_server`` in its own process, one
   SSE event per write. Measured per full request (send, read, parse, assemble): our
   OpenAICompatProvider vs the SDK's ``AsyncOpenAI.chat.completions.stream`` accumulator (what
   assembles text, tool calls and usage, like ours), and, for reference, the SDK's bare
   ``create(stream=True)`` iteration. Same server, one event loop, repetitions interleaved;
   medians compared. Target: ours <= 0.5x the accumulator's time. Also ours with a
   ``CancelSignal`` that is never set (what CoreLoop hands every request: the cost of a prompt
   cancel on the read path), side by side with ours without one.
2. Import time: ``import steerable_agent_runtime.llm`` plus ``...llm.openai_compat`` vs
   ``import httpx`` alone, each in a fresh interpreter (the clock starts after interpreter
   start-up), repetitions interleaved, medians. Target <= 1.3x.

Usage (from the repository root):
    .venv/bin/python bench/llm_bench.py [--chunks 20000] [--reps 7] [--import-reps 11] [--json OUT]
        [--only parse|import] [--no-sdk]

Nothing here asserts a time: it prints the figures (and writes them as JSON with --json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.llm.streams.make_openai_streams import chunk, usage  # noqa: E402 - after the sys.path line

WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog, ", "and ")
IMPORT_OURS = "import steerable_agent_runtime.llm, steerable_agent_runtime.llm.openai_compat"
IMPORT_HTTPX = "import httpx"


def make_stream(chunks: int) -> bytes:
    """A chat/completions stream of ``chunks`` content deltas plus role, finish, usage and [DONE]."""
    parts = [chunk({"role": "assistant", "content": ""})]
    parts += [chunk({"content": WORDS[i % len(WORDS)]}) for i in range(chunks)]
    parts += [chunk({}, "stop"), chunk(choices=False, usage=usage(1200, chunks)), "data: [DONE]\n\n"]
    return "".join(parts).encode()


def start_server(work: Path, stream: bytes) -> tuple[subprocess.Popen, str]:
    (work / "stream.sse").write_bytes(stream)
    (work / "script.json").write_text(json.dumps([{"file": "stream.sse"}]))
    port_file = work / "port"
    proc = subprocess.Popen([sys.executable, "-m", "tests.replay_server", str(work / "script.json"),
                             "--port-file", str(port_file)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while not port_file.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("replay server did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{port_file.read_text()}/v1"


async def parse_figures(base_url: str, reps: int, sdk: bool = True) -> dict[str, list[float]]:
    import openai
    from steerable_agent_runtime.llm import OpenAICompatProvider
    from steerable_agent_runtime.llm.cancel import CancelSignal
    from steerable_agent_runtime.models import LLMMessage

    provider = OpenAICompatProvider("gpt-4.1-mini", base_url=base_url, api_key="sk-bench")
    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=base_url, max_retries=0)
    messages = [{"role": "user", "content": "hi"}]

    async def ours() -> str:
        text = []
        async for piece in provider.stream([LLMMessage(role="user", content="hi")]):
            if piece.content_delta:
                text.append(piece.content_delta)
        return "".join(text)

    async def ours_cancel() -> str:  # what CoreLoop passes: a fresh CancelSignal per request, never set
        text = []
        async for piece in provider.stream([LLMMessage(role="user", content="hi")], cancel=CancelSignal()):
            if piece.content_delta:
                text.append(piece.content_delta)
        return "".join(text)

    async def sdk_accumulator() -> str:
        async with client.chat.completions.stream(model="gpt-4.1-mini", messages=messages,
                                                  stream_options={"include_usage": True}) as stream:
            async for _ in stream:
                pass
            final = await stream.get_final_completion()
        return final.choices[0].message.content

    async def sdk_raw() -> str:
        text = []
        response = await client.chat.completions.create(model="gpt-4.1-mini", messages=messages, stream=True,
                                                        stream_options={"include_usage": True})
        async for item in response:
            if item.choices and item.choices[0].delta.content:
                text.append(item.choices[0].delta.content)
        return "".join(text)

    variants = {"ours": ours, "ours_cancel": ours_cancel}
    if sdk:
        variants.update(sdk_accumulator=sdk_accumulator, sdk_raw=sdk_raw)
    texts = {name: await fn() for name, fn in variants.items()}  # warm-up, and the same answer from each
    if len(set(texts.values())) != 1:
        raise RuntimeError("the parsers disagree on the text")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, fn in variants.items():
            started = time.perf_counter()
            await fn()
            times[name].append(time.perf_counter() - started)
    await provider.aclose()
    await client.close()
    return times


def import_seconds(statement: str) -> float:
    code = f"import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd="/")
    return float(out.stdout.strip())


def import_figures(reps: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"ours": [], "httpx": []}
    import_seconds(IMPORT_OURS)  # warm the page cache and the .pyc files
    for _ in range(reps):
        times["httpx"].append(import_seconds(IMPORT_HTTPX))
        times["ours"].append(import_seconds(IMPORT_OURS))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--import-reps", type=int, default=11)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", choices=("parse", "import"), help="measure one of the two figures")
    parser.add_argument("--no-sdk", action="store_true", help="parse: ours with and without a CancelSignal only")
    args = parser.parse_args()
    parse: dict[str, list[float]] = {}
    imports: dict[str, list[float]] = {}
    if args.only != "import":
        with tempfile.TemporaryDirectory() as tmp:
            proc, url = start_server(Path(tmp), make_stream(args.chunks))
            try:
                parse = asyncio.run(parse_figures(url, args.reps, sdk=not args.no_sdk))
            finally:
                proc.kill()
                proc.wait()
    if args.only != "parse":
        imports = import_figures(args.import_reps)
    print_report(args, parse, imports)


def print_report(args: argparse.Namespace, parse: dict[str, list[float]], imports: dict[str, list[float]]) -> None:
    med = {f"parse_{k}_s": statistics.median(v) for k, v in parse.items()}
    med.update({f"import_{k}_s": statistics.median(v) for k, v in imports.items()})
    report: dict[str, object] = {"chunks": args.chunks, "reps": args.reps, "import_reps": args.import_reps, **med,
                                 "samples": {"parse": parse, "import": imports}}
    labels = {"parse_ours_s": "parse, ours (OpenAICompatProvider)",
              "parse_ours_cancel_s": "parse, ours with a CancelSignal (CoreLoop's read)",
              "parse_sdk_accumulator_s": "parse, openai SDK stream() accumulator",
              "parse_sdk_raw_s": "parse, openai SDK create(stream=True)",
              "import_ours_s": "import steerable_agent_runtime.llm + openai_compat",
              "import_httpx_s": "import httpx"}
    for key, label in labels.items():
        if key in med:
            print(f"{label:<52} {med[key] * 1000:10.1f} ms")
    ratios = {"parse_ratio_vs_sdk_accumulator": ("parse", "sdk_accumulator",
                                                 "parse ratio ours / SDK accumulator (target <= 0.5)"),
              "parse_ratio_vs_sdk_raw": ("parse", "sdk_raw", "parse ratio ours / SDK create(stream=True)"),
              "import_ratio_vs_httpx": ("import", "httpx", "import ratio ours / httpx (target <= 1.3)")}
    for name, (kind, base, label) in ratios.items():
        if f"{kind}_{base}_s" in med:
            report[name] = med[f"{kind}_ours_s"] / med[f"{kind}_{base}_s"]
            print(f"{label:<52} {report[name]:10.2f}")
    if "parse_ours_cancel_s" in med:
        report["parse_ratio_cancel_vs_plain"] = med["parse_ours_cancel_s"] / med["parse_ours_s"]
        print(f"{'parse ratio ours with a CancelSignal / ours':<52} {report['parse_ratio_cancel_vs_plain']:10.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
